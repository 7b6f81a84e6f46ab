"""The soak benchmark in small (tests/soak.py; docs/reliability.md has the 10^6-packet
run): two 4-worker jobs back to back through 5 % loss, 2 % duplication and reordering on
every link, every RESULT and every output checked against the inputs' sums, the switch's RSS
sampled.  The script's own checks decide its exit status; this runs it as a user would."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_short_soak_is_exact(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "soak.py"), "--packets",
                        "15000", "--blocks", "2000", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.strip().endswith(("yes", "NO"))]
    assert len(rows) >= 2 and all(ln.endswith("yes") for ln in rows), r.stdout
    assert "FAILED" not in r.stdout
    assert (tmp_path / "soak.png").stat().st_size > 0
    samples = (tmp_path / "soak.csv").read_text().splitlines()
    assert samples[0] == "seconds,rss_kib" and len(samples) > 5
