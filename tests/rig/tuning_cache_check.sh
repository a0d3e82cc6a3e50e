#!/bin/sh
# A node's tuning cache outlives its jobs, but not the network it was measured over: after a job
# over 1 Gbit/s links, one over 250 Mbit/s finds the cached net class off and measures the network
# again, and the next job at that rate keeps what that one measured.
# Usage: tuning_cache_check.sh WEFT_RIG WEFTRUN ALL_REDUCE_PERF JOB_LIMIT WAIT_LIMIT
set -u
rig=$1 weftrun=$2 tool=$3 job_limit=$4 wait_limit=$5
cache=$(mktemp -d) || exit 1
trap 'rm -rf "$cache"' EXIT

# job RATE: one 2 x 2 all-reduce job over links of RATE; its output, with WEFT_DEBUG=INFO, in $out.
job() {
  out=$("$rig" --ranks 2,2 --rate "$1" --timeout "$job_limit" --weftrun "$weftrun" \
    --env WEFT_CACHE_DIR="$cache" --env WEFT_DEBUG=INFO --env WEFT_TIMEOUT="$wait_limit" \
    -- "$tool" -b 8 -e 8 -n 1 -w 0 -c 1 2>&1)
  status=$?
  [ "$status" -eq 77 ] && { echo "$out"; exit 77; }
  [ "$status" -eq 0 ] || fail "the job at $1 failed ($status)"
}
fail() { echo "FAIL: $1"; echo "$out"; exit 1; }

job 1gbit
echo "$out" | grep -q "tuner calibrated .*net " || fail "the first job did not measure the network"
job 250mbit
echo "$out" | grep -q "net class's .*the network has changed; measuring it again" ||
  fail "a job over 250 Mbit/s kept the cache measured over 1 Gbit/s"
echo "$out" | grep -q "tuner calibrated .*net " || fail "the network was not measured again"
job 250mbit
echo "$out" | grep -q "net class's .*: it stands" ||
  fail "the next job at 250 Mbit/s did not keep what the one before measured"
echo "$out" | grep -q "tuner calibrated" && fail "the next job at 250 Mbit/s measured again"
echo "ok: the cached net class follows the link's rate"
