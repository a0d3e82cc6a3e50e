#!/usr/bin/python3
"""Cross-checks Weft's GPT against an independent PyTorch implementation.

    torch_crosscheck.py DUMPER

Runs DUMPER (trainer_torch_dump) into a temporary directory, rebuilds the same GPT-2 in
PyTorch (float64, autograd) from the dumped initial parameters, runs the same batch, and
compares: the loss within 1e-5 relative, and every tensor's gradient within 1e-5 in relative
norm, ||g_weft - g_torch|| / ||g_torch||. Weft computes in fp32, so both differ from the float64
reference by rounding only (~1e-7); a wrong op or gradient is off by far more.
"""
import math
import os
import subprocess
import sys
import tempfile

REL_TOL = 1e-5

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    sys.exit(f"torch_crosscheck: FAILED: cannot import PyTorch ({error}); install Debian's "
             "python3-torch (scripts/setup does) and run this with /usr/bin/python3")


def load(directory):
    def path(name):
        return os.path.join(directory, name)

    with open(path("shape.txt")) as f:
        n_layer, n_head, n_embd, seq_len, vocab, batch = map(int, f.read().split())
    params = np.fromfile(path("params.f32"), dtype="<f4").astype(np.float64)
    grads = np.fromfile(path("grads.f32"), dtype="<f4").astype(np.float64)
    tensors = {}
    with open(path("layout.txt")) as f:
        for line in f:
            name, offset, size, *dims = line.split()
            offset, size, dims = int(offset), int(size), [int(d) for d in dims]
            tensors[name] = (params[offset:offset + size].reshape(dims),
                             grads[offset:offset + size].reshape(dims))
    tokens = np.fromfile(path("tokens.u8"), dtype=np.uint8).astype(np.int64)
    targets = np.fromfile(path("targets.u8"), dtype=np.uint8).astype(np.int64)
    with open(path("loss.txt")) as f:
        loss = float(f.read())
    shape = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, seq_len=seq_len, vocab=vocab,
                 batch=batch)
    return shape, tensors, tokens.reshape(batch, seq_len), targets.reshape(batch, seq_len), loss


def gpt_loss(p, tokens, targets, shape):
    """GPT-2 over bytes with a tied head, written from the architecture's definition."""
    B, T = tokens.shape
    C, NH = shape["n_embd"], shape["n_head"]
    hs = C // NH

    def layer_norm(x, prefix):
        return F.layer_norm(x, (C,), p[prefix + ".w"], p[prefix + ".b"], eps=1e-5)

    x = p["wte"][tokens] + p["wpe"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(shape["n_layer"]):
        h = f"h.{layer}."
        qkv = layer_norm(x, h + "ln1") @ p[h + "attn.qkv.w"].T + p[h + "attn.qkv.b"]
        q, k, v = (part.reshape(B, T, NH, hs).transpose(1, 2) for part in qkv.split(C, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[h + "attn.proj.w"].T + p[h + "attn.proj.b"]
        fc = layer_norm(x, h + "ln2") @ p[h + "mlp.fc.w"].T + p[h + "mlp.fc.b"]
        x = x + F.gelu(fc, approximate="tanh") @ p[h + "mlp.proj.w"].T + p[h + "mlp.proj.b"]
    logits = layer_norm(x, "lnf") @ p["wte"].T
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_crosscheck.py DUMPER")
    with tempfile.TemporaryDirectory(prefix="weft_torch_") as directory:
        subprocess.run([sys.argv[1], directory], check=True)
        shape, tensors, tokens, targets, weft_loss = load(directory)

    params = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
              for name, (value, _) in tensors.items()}
    loss = gpt_loss(params, torch.from_numpy(tokens), torch.from_numpy(targets), shape)
    loss.backward()

    failures = []
    rel = abs(weft_loss - loss.item()) / abs(loss.item())
    print(f"loss: weft {weft_loss:.10f}, torch {loss.item():.10f}, relative difference {rel:.2e}")
    if not rel <= REL_TOL:
        failures.append(f"loss differs by {rel:.2e} relative")
    worst = 0.0
    for name, (_, weft_grad) in tensors.items():
        reference = params[name].grad.numpy()
        norm = np.linalg.norm(reference)
        rel = np.linalg.norm(weft_grad - reference) / norm if norm > 0 else np.linalg.norm(weft_grad)
        worst = max(worst, rel)
        if not rel <= REL_TOL:
            failures.append(f"gradient of {name} differs by {rel:.2e} in relative norm")
    print(f"gradients: {len(tensors)} tensors, worst relative difference {worst:.2e} "
          f"(tolerance {REL_TOL:g}); torch {torch.__version__}")
    if failures:
        print("torch_crosscheck: FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("torch_crosscheck: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
