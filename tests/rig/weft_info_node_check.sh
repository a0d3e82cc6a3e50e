#!/bin/sh
# Run by weft-rig --per-node: inside node i, weft-info must see hostname rig-node<i> and the
# rig's interface rig0, and reach node 0 across the bridge (a closed port there answers with a
# refusal, which only a reachable host sends).
# Usage: weft_info_node_check.sh WEFT_INFO
out=$("$1" --peer 10.99.0.1:1)
fail() { echo "node $RIG_NODE_RANK: $1"; echo "$out"; exit 1; }
echo "$out" | grep -q "^Weft on rig-node$RIG_NODE_RANK " || fail "wrong hostname"
echo "$out" | grep -q "^  rig0 up" || fail "no rig0 interface"
echo "$out" | grep -q "peer 10.99.0.1:1: .*refused" || fail "node 0 unreachable"
