#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs consumer projects against it:
# the C++ one against the static libraries with find_package(weft) and with pkg-config (weft),
# the C one against libweft.so with find_package(weft) and with pkg-config (weft-c).
set -euo pipefail
build_dir=$1
source_dir=$2
weftrun=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
ninja -C "$work/consumer" >/dev/null
"$weftrun" -n 1 --timeout 60 -- "$work/consumer/consumer"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
g++ -std=c++20 "$source_dir/consumer/main.cc" -o "$work/consumer_pc" $(pkg-config --cflags --libs weft)
"$weftrun" -n 1 --timeout 60 -- "$work/consumer_pc"

# The shared library: installed with its SONAME link, found by the C project through CMake.
lib="$work/prefix/lib/libweft.so"
[[ -L $lib && -e $lib.0 ]] || { echo "libweft.so or libweft.so.0 is not installed"; exit 1; }
cmake -S "$source_dir/consumer_c" -B "$work/consumer_c" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
ninja -C "$work/consumer_c" >/dev/null
# ldd's output is taken whole first: grep -q stops reading at its match, and under pipefail the
# SIGPIPE that ldd may then get would fail the check.
linked=$(ldd "$work/consumer_c/consumer_c")
grep -q "libweft.so.0 => $work/prefix/lib/" <<<"$linked" ||
  { echo "consumer_c does not load the installed libweft.so.0"; exit 1; }
"$weftrun" -n 2 --timeout 60 -- "$work/consumer_c/consumer_c"
# And through pkg-config, as a C99 program with every warning an error.
cc -std=c99 -Wall -Wextra -Werror "$source_dir/consumer_c/main.c" -o "$work/consumer_c_pc" \
  $(pkg-config --cflags --libs weft-c) -Wl,-rpath,"$(pkg-config --variable=libdir weft-c)"
"$weftrun" -n 2 --timeout 60 -- "$work/consumer_c_pc"
