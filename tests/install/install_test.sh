#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer project against it
# twice: with find_package(weft) and with pkg-config.
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
