#!/usr/bin/env bash
# Runs an example under weftrun and checks that it succeeded and that every rank printed a line
# matching PATTERN. An argument "{tmpdir}" becomes a fresh empty directory.
#   run_example.sh WEFTRUN RANKS PATTERN PROGRAM [ARGS...]
set -uo pipefail
weftrun=$1 ranks=$2 pattern=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=()
for a in "$@"; do [[ $a == "{tmpdir}" ]] && args+=("$work/store") || args+=("$a"); done
mkdir "$work/store"
output=$(WEFT_FLIGHT_RECORDER_DIR="$work" "$weftrun" -n "$ranks" --timeout 120 -- "${args[@]}" 2>&1)
rc=$?
echo "$output"
[[ $rc -eq 0 ]] || { echo "exit status $rc"; exit 1; }
for ((r = 0; r < ranks; r++)); do
  grep -qE "^\[$r\] .*$pattern" <<<"$output" || { echo "rank $r printed no line matching: $pattern"; exit 1; }
done
