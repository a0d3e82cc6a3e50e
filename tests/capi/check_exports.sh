#!/usr/bin/env bash
# libweft.so exports the public API and nothing else: the C functions of weft.h and comm's
# public C++ API; no Abseil, no standard library, no weft::internal. And it is versioned.
set -euo pipefail
lib=$1
symbols=$(nm -D --defined-only --demangle "$lib" | cut -d' ' -f3-)
allowed='^(weft[A-Z][A-Za-z]*|weft::(Communicator|Work)::.*|weft::(AllocShared|FreeShared|CreateWithStore|IsFloatingPoint|Name|ParseDataType|ParseReduceOp)\(.*)$'
status=0
if unexpected=$(grep -Ev "$allowed" <<<"$symbols"); then
  echo "exported but not public API:"; echo "$unexpected"; status=1
fi
if leaked=$(grep -E '^(absl|std|__gnu)|weft::internal' <<<"$symbols"); then
  echo "internal symbols exported:"; echo "$leaked"; status=1
fi
for want in weftAllReduce weftCommInitWithStore weftGetLastError weftRequestSetCallback \
    'weft::Communicator::AllReduce(' 'weft::Work::Wait(' 'weft::CreateWithStore(' \
    'weft::Communicator::CreateFromEnvironment('; do
  grep -qF -- "$want" <<<"$symbols" || { echo "missing export: $want"; status=1; }
done
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ $soname =~ ^libweft\.so\.[0-9]+$ ]] || { echo "SONAME is '$soname'"; status=1; }
echo "$(wc -l <<<"$symbols") symbols exported, SONAME $soname"
exit $status
