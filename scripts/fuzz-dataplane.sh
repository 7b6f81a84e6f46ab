#!/bin/sh
# The full data-plane fuzz of docs/reliability.md: 10^5 hostile frames into the ports of a
# running 4-worker job (tests/e2e/test_dataplane_fuzz.py at 25 times its CI size).
# Usage: scripts/fuzz-dataplane.sh [SEED]   (prints the seed, the frames by kind, the counters)
set -eu
cd "$(dirname "$0")/.."
export NETSUM_FUZZ_SCALE="${NETSUM_FUZZ_SCALE:-25}"
if [ $# -gt 0 ]; then export NETSUM_FUZZ_SEED="$1"; fi
exec .venv/bin/python -m pytest -q -s -p no:cacheprovider tests/e2e/test_dataplane_fuzz.py
