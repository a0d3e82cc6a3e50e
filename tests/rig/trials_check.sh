#!/bin/sh
# The job's trials run across nodes too. A tuning file prices the flat ring's 8 KiB all-reduce
# the cheapest, and recursive doubling within 2.5x of it; over the link the ring's six steps take
# some 2.5x the doubling's two, and the trials move the job off the ring.
# Usage: trials_check.sh WEFT_RIG WEFTRUN ALL_REDUCE_PERF JOB_LIMIT WAIT_LIMIT
set -u
rig=$1 weftrun=$2 tool=$3 job_limit=$4 wait_limit=$5
. "$(dirname "$0")/rig_job.sh"
cache=$(mktemp -d) || exit 1
trap 'rm -rf "$cache"' EXIT

rig_job 1gbit --env WEFT_CACHE_DIR="$cache" -- "$tool" -b 8 -e 8 -n 1 -w 0 -c 1
awk '$1 ~ /^ring\.all_reduce\./ { $2 *= 0.25 } { print }' "$cache/tuning-rig-node0.txt" \
  >"$cache/cheap-ring.txt" || fail "no tuning cache from the first job"
rig_job 1gbit --env WEFT_TUNING_FILE="$cache/cheap-ring.txt" -- "$tool" -b 8K -e 8K -n 400 -w 0 -c 0
echo "$out" | grep -q "tuner: all_reduce 8192 bytes .*: ring predicted .*the job times ring, " ||
  fail "the tuning file did not make the ring the pick with contenders"
decided=$(echo "$out" | grep "trials: all_reduce of 8192 bytes took ring .*(incumbent)") ||
  fail "no round of trials moved the job off the ring"
echo "$decided" | grep -q ": ring from now on" && fail "the trials kept the ring"
echo "ok: $decided"
