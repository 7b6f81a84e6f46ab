"""The training comparison's report (netsum/training/compare.py) when a variant failed: the CSV,
the table and the PNG are still written, the failed variant marked, its error kept."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from netsum.training.compare import (VariantResult, routes, summary_table, write_csv,  # noqa: E402
                                     write_png)


def _ok(comm: str, steps: int = 8) -> VariantResult:
    rows = [{"step": i, "loss": 2.0 / (i + 1), "wall_s": 0.010, "compute_s": 0.006,
             "exposed_s": 0.002, "comm_s": 0.003, "hidden_s": 0.001, "buckets": 2}
            for i in range(steps)]
    return VariantResult(comm, True, "", 1.0, {"steps_log": rows, "final_test_accuracy": 0.9,
                                               "evals": [{"step": steps - 1,
                                                          "test_accuracy": 0.9}]})


def test_a_failed_variant_still_gives_the_report(tmp_path: Path) -> None:
    failed = VariantResult("hook", False, "rank 1: allreduce: no result for 5.0 s", 3.0, {})
    results = [failed, _ok("gloo")]
    write_png(tmp_path / "t.png", results)
    write_csv(tmp_path / "t.csv", results)
    assert (tmp_path / "t.png").stat().st_size > 10_000
    rows = (tmp_path / "t.csv").read_text().splitlines()
    # The header and gloo's 8 steps; the failed variant has no rows.
    assert len(rows) == 1 + 8 and all(r.startswith("gloo,") for r in rows[1:])
    table = summary_table(results)
    assert "hook            NO" in table and "gloo            yes" in table


def test_every_variant_failed(tmp_path: Path) -> None:
    results = [VariantResult(c, False, "boom", 1.0, {}) for c in ("hook", "gloo")]
    write_png(tmp_path / "t.png", results)
    assert (tmp_path / "t.png").exists()


def test_the_table_says_what_went_through_the_switch_and_what_to_gloo(tmp_path: Path) -> None:
    hook = _ok("netsum-backend")
    hook.metrics["ledger"] = {
        "allreduce": {"switch": {"calls": 10, "bytes": 40960},
                      "gloo": {"calls": 2, "bytes": 8}},
        "reduce_scatter_single": {"switch (all-reduce)": {"calls": 3, "bytes": 1024}},
        "barrier": {"gloo": {"calls": 1, "bytes": 0}}}
    hook.metrics["final_loss"] = 0.5
    gloo = _ok("gloo")
    gloo.metrics["final_loss"] = 0.25
    assert routes(hook) == (13, 41984, 3, 8) and routes(gloo) is None
    table = summary_table([hook, gloo])
    line = next(ln for ln in table.splitlines() if ln.startswith("netsum-backend"))
    assert "0.50000" in line and "0.25" in line and "13 / 41K" in line and "3 / 0K" in line
    write_png(tmp_path / "t.png", [hook, gloo])
    assert (tmp_path / "t.png").stat().st_size > 10_000
