#!/usr/bin/env bash
# Real p4c's outputs for this project's own programs, as test fixtures (tool output is data):
#
#   scripts/p4c-fixtures.sh PATH/TO/p4c-bm2-ss
#
#   tests/p4programs/NAME.p4  -> tests/fixtures/p4c/programs/NAME.{p4,json,p4info.txtpb}
#   p4/netsum.p4, each K      -> tests/fixtures/p4c/netsum/netsum.p4 + netsum_k<K>.{json,p4info.txtpb}
#
# The source is copied beside its outputs, so the fixtures stay consistent when a program
# changes later (tests compile the copy).  A program p4c rejects is reported and has no outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
p4c=${1:?usage: $0 PATH/TO/p4c-bm2-ss}
out=tests/fixtures/p4c
"$p4c" --version | head -1
mkdir -p "$out/programs" "$out/netsum"
status=0
for src in tests/p4programs/*.p4; do
    name=$(basename "$src" .p4)
    cp "$src" "$out/programs/$name.p4"
    if ! (cd "$out/programs" && "$p4c" --arch v1model -o "$name.json" \
            --p4runtime-files "$name.p4info.txtpb" "$name.p4" 2> "/tmp/p4c-fixture-$name.err"); then
        echo "p4c rejects tests/p4programs/$name.p4: $(head -1 /tmp/p4c-fixture-$name.err)" >&2
        rm -f "$out/programs/$name".{p4,json,p4info.txtpb}
        status=1
    fi
done
cp p4/netsum.p4 "$out/netsum/netsum.p4"
for k in $(.venv/bin/python -c 'from netsum.wire import K_SUPPORTED; print(*K_SUPPORTED)'); do
    (cd "$out/netsum" && "$p4c" --arch v1model -DNETSUM_K="$k" -o "netsum_k$k.json" \
        --p4runtime-files "netsum_k$k.p4info.txtpb" netsum.p4) || { echo "p4c rejects netsum.p4 at K=$k" >&2; status=1; }
done
exit $status
