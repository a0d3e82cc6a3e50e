# Sourced by the rig's checks, which set rig, weftrun, job_limit and wait_limit.
# rig_job RATE ARGS...: one 2 x 2 job over links of RATE, ARGS being weft-rig's options, --, and
# the command; its output, with WEFT_DEBUG=INFO, in $out. Exits 77 where the rig cannot run.
rig_job() {
  rate=$1
  shift
  out=$("$rig" --ranks 2,2 --rate "$rate" --timeout "$job_limit" --weftrun "$weftrun" \
    --env WEFT_DEBUG=INFO --env WEFT_TIMEOUT="$wait_limit" "$@" 2>&1)
  status=$?
  [ "$status" -eq 77 ] && { echo "$out"; exit 77; }
  [ "$status" -eq 0 ] || fail "the job at $rate failed ($status)"
}
fail() { echo "FAIL: $1"; echo "$out"; exit 1; }
