"""What the benchmark scripts (compare-peers) share: child processes under a hard time limit, sizes
and iteration counts as nccl-tests writes and the scripts choose them."""

import argparse
import os
import re
import signal
import subprocess

ITER_BYTES = 256 << 20  # each timed loop moves about this much: many iterations for small sizes
# A loop of 1000 tiny operations lasts half a millisecond, which one scheduler hiccup moves by
# 10%: small sizes run up to 20000 (a loop of at least 10 ms).
MIN_ITERS, MAX_ITERS = 5, 20000


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 8, 64K, 1M, 256M)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def name_list(choices):
    def parse(text):
        names = [part.strip() for part in text.split(",") if part.strip()]
        for name in names:
            if name not in choices:
                raise argparse.ArgumentTypeError(
                    f"unknown '{name}'; choose from {', '.join(choices)}")
        return names
    return parse


def human_size(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def iterations_for(size, fixed):
    """The timed and warmup iterations for one size: about ITER_BYTES per timed loop."""
    iters = fixed or max(MIN_ITERS, min(MAX_ITERS, ITER_BYTES // max(size, 1)))
    return iters, max(1, min(iters // 10, 50))


class Run:
    """One child process: its command, output and how it ended."""

    def __init__(self, command, timeout, env=None):
        self.command = command
        self.status = None
        self.output = ""
        self.timed_out = False
        try:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, text=True,
                                     errors="replace", start_new_session=True)
        except OSError as e:
            self.output = f"cannot start {command[0]}: {e}"
            self.status = 127
            return
        try:
            self.output, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.output = self._stop(child)
        self.status = child.returncode

    @staticmethod
    def _stop(child):
        # The launcher and its ranks share the session started above: stop them all, politely
        # first (a launcher such as weft-rig cleans up on SIGTERM), then for good.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                pass  # the group is gone; a process outside it may still hold the pipe
            try:
                out, _ = child.communicate(timeout=10)
                return out or ""
            except subprocess.TimeoutExpired:
                continue
        # Something that left the group keeps the pipe open: stop reading rather than wait.
        child.stdout.close()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return "(output lost: a process outside the run's group kept its pipe open)"

    @property
    def ok(self):
        return self.status == 0 and not self.timed_out

    def why(self):
        if self.timed_out:
            return "timed out"
        return f"exit status {self.status}"

    def tail(self, lines=6):
        return "\n".join(self.output.strip().splitlines()[-lines:])
