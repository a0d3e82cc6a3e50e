#!/bin/sh
# Runs "$@" as one rank of a job that pretends to span several nodes on this machine: it sets
# WEFT_HOSTNAME to word number WEFT_RANK (or RANK) of WEFT_FAKE_HOSTS, counting from 0.
#
#   WEFT_FAKE_HOSTS="a a b b" weftrun -n 4 -- tests/hierarchy/with_host.sh ./all_reduce_perf
#
# gives 2 nodes x 2 ranks (ranks with different hosts talk TCP, so also set WEFT_SOCKET_IFNAME=lo);
# "a a a b" gives uneven nodes of 3 + 1 ranks.
rank=${WEFT_RANK:-${RANK:-}}
if [ -z "$rank" ] || [ -z "$WEFT_FAKE_HOSTS" ]; then
  echo "with_host.sh: needs WEFT_FAKE_HOSTS and WEFT_RANK (or RANK) in the environment" >&2
  exit 2
fi
unset WEFT_HOSTNAME
i=0
for host in $WEFT_FAKE_HOSTS; do
  if [ "$i" = "$rank" ]; then
    WEFT_HOSTNAME=$host
    export WEFT_HOSTNAME
  fi
  i=$((i + 1))
done
if [ -z "$WEFT_HOSTNAME" ]; then
  echo "with_host.sh: rank $rank has no host in WEFT_FAKE_HOSTS='$WEFT_FAKE_HOSTS'" >&2
  exit 2
fi
exec "$@"
