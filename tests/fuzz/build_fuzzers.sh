#!/bin/bash
# Builds the libFuzzer binaries with Clang against a GCC build of Weft (the rest of Weft need not
# build with Clang): each target's own parser sources are compiled in, instrumented for coverage
# and with ASan/UBSan; everything else links from the GCC build's libraries.
#
#   tests/fuzz/build_fuzzers.sh BUILD_DIR OUT_DIR        # BUILD_DIR: a configured GCC build
#   OUT_DIR/fuzz_store -max_total_time=60 tests/fuzz/corpus/store
#
# The GCC build must have built the replay drivers (ninja fuzz_replay_<target>): their link line
# is reused.
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"

declare -A parsers=(
  [unique_id]="comm/src/bootstrap/unique_id.cc"
  [tcp_hello]="comm/src/transport/tcp/handshake.cc"
  [envelope]="comm/src/envelope.cc"
  [listener_record]="comm/src/transport/tcp/listener_record.cc"
  [rank_process]="comm/src/fault_watch.cc"
  [store]="comm/src/bootstrap/tcp_store_wire.cc comm/src/bootstrap/tcp_store_server.cc
    comm/src/bootstrap/tcp_store_client.cc"
  [flight_dump]="tools/weft-trace/json.cc tools/weft-trace/dump.cc tools/weft-trace/analysis.cc"
)

for target in "${!parsers[@]}"; do
  # LINK_LIBRARIES of the replay driver, with build-relative paths made absolute.
  libs=$(awk -v t="build tests/fuzz/fuzz_replay_${target}:" '
      index($0, t) == 1 { found = 1; next }
      found && /LINK_LIBRARIES/ { sub(/^ *LINK_LIBRARIES = /, ""); print; exit }' \
      "$build/build.ninja" | sed -E "s#(^| )([a-z_]+/[^ ]+\.a)#\1$build/\2#g")
  if [ -z "$libs" ]; then
    echo "no link line for fuzz_replay_${target} in $build/build.ninja" >&2
    exit 1
  fi
  sources=""
  for s in ${parsers[$target]}; do sources="$sources $src/$s"; done
  echo "building $out/fuzz_$target"
  # shellcheck disable=SC2086
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src/comm/src" -I"$src/comm/include" -I"$src/kernels/include" \
    -I"$src/topology/include" -I"$src/tools/weft-trace" -I"$src/tests/fuzz" \
    "$src/tests/fuzz/${target}_fuzz.cc" $sources $libs -o "$out/fuzz_$target"
done
