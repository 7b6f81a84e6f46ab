#!/usr/bin/env bash
# STF conformance sweep: p4c's bmv2 STF programs (v1model, those real p4c compiles) played on
# netsum-switch.  Needs a p4c source tree (for testdata/); p4c itself is not needed.
#
#   scripts/stf-sweep.sh P4C_SRC [--json-dir DIR] [--jobs N] [--out DIR] [--only NAME ...]
#
# Without --json-dir each program is compiled by netsum-p4c; with it, NAME.json and
# NAME.p4info.txtpb are taken from DIR (real p4c's outputs).  Results: OUT/results.json and
# OUT/summary.md (failures grouped by cause); default OUT is results/stf.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -d "$1/testdata/p4_16_samples" ]; then
    echo "usage: $0 P4C_SRC [sweep options]  (P4C_SRC/testdata/p4_16_samples must exist)" >&2
    exit 2
fi
src=$1; shift
exec nice -n 10 .venv/bin/python -m netsum.tools.stf sweep --samples "$src/testdata/p4_16_samples" "$@"
