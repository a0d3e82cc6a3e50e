#!/usr/bin/env bash
# Training-throughput benchmark (not a test): the baby config on 2 ranks × 1 thread and on
# 1 rank × 2 threads, printing tokens/s, the share of step time spent waiting on communication and
# the CPU time per step, next to the machine's load (other work on the machine skews wall time;
# CPU time per step does not depend on it).
#
#   trainer/bench_throughput.sh [STEPS] [extra weft-train arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEFT_BUILD_DIR:-build}
steps=${1:-200}
shift || true
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {
  local name=$1
  shift
  local line
  line=$("$@" --config configs/baby.json --steps "$steps" --out "$out/$name" \
           --set eval_every=0 --set checkpoint_every=0 --set sample_tokens=0 "${extra[@]}" |
         grep 'done:')
  printf '%-18s %s\n' "$name" "${line#*done: }"
}

extra=("$@")
echo "baby config, $steps steps; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run "2 ranks x 1 thr" "$build/tools/weftrun/weftrun" -n 2 -- "$build/trainer/weft-train"
run "1 rank x 2 thr" "$build/trainer/weft-train" --set threads=2
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
