"""Training the way people train, through the real switch (netsum-switch daemon on UDP-tunnel
ports), each run against the same run with gloo in the same test: FSDP (FULL_SHARD) and FSDP2
through the netsum backend, DDP in bfloat16 through the hook, and mixed precision with
GradScaler and an injected Inf.

Expectations come from gloo's runs (same seed, same batches, same initial parameters): the
final loss within 1e-3, the steps GradScaler skipped on every rank; and from the switch's own
per-job counters, read over P4Runtime (the runs leave their jobs behind, --keep-job).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")
pytest.importorskip("sklearn", reason="scikit-learn is not installed (the `train` extra)")

from netsum.controller.fabric import Controller  # noqa: E402
from netsum.controller.topology import load_topology  # noqa: E402
from netsum.rig import Rig, RigConfig  # noqa: E402
from netsum.training.compare import TrainOptions, VariantResult, run_variant  # noqa: E402

pytestmark = pytest.mark.slow
STEPS = 40


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with Rig(RigConfig(tmp_path_factory.mktemp("rig"), workers=2)) as r:
        r.detach_controller()
        yield r


def run(rig: Rig, out: Path, comm: str, *extra: str, steps: int = STEPS) -> VariantResult:
    opts = TrainOptions(out, ranks=2, steps=steps, extra=("--eval-every", str(steps), *extra))
    res = run_variant(rig, comm, opts, say=lambda _m: None)
    assert res.ok, f"{comm} {' '.join(extra)}: {res.error}"
    return res


def rank_doc(res: VariantResult, out: Path, rank: int) -> dict[str, object]:
    doc: dict[str, object] = json.loads((out / res.comm / f"rank{rank}.json").read_text())
    return doc


def counters(rig: Rig, job_ids: list[int]) -> dict[int, dict[str, int]]:
    """The switch's per-job counters of these jobs, then the jobs deleted (counters zeroed)."""
    with Controller(load_topology(rig.topology_path)) as ctl:
        ctl.connect()
        ctl.adopt()
        rows = {int(str(r["job"])): {k: int(str(v)) for k, v in r.items()
                                     if k in ("data_in", "results_out", "retx")}
                for r in ctl.job_stats() if int(str(r["job"])) in job_ids}
        for j in job_ids:
            # The counters of a job id outlive the job: zeroed here so that a later job with
            # the same id (the next test's) starts from 0.
            ctl.reset_job(j)
            ctl.delete_job(j)
    return rows


def final_loss(res: VariantResult) -> float:
    return float(str(res.metrics["final_loss"]))


@pytest.mark.parametrize("wrap", ["fsdp", "fsdp2"])
def test_fsdp_full_shard_through_the_switch_ends_on_gloos_loss(rig: Rig, tmp_path: Path,
                                                                 wrap: str) -> None:
    gloo = run(rig, tmp_path, "gloo", "--wrap", wrap)
    ns = run(rig, tmp_path, "netsum-backend", "--wrap", wrap, "--keep-job")
    assert abs(final_loss(ns) - final_loss(gloo)) <= 1e-3, (final_loss(ns), final_loss(gloo))
    assert gloo.accuracy > 0.25, "the baseline did not learn: the comparison says nothing"
    for r in range(2):
        assert abs(float(str(rank_doc(ns, tmp_path, r)["final_loss"])) -
                   float(str(rank_doc(gloo, tmp_path, r)["final_loss"]))) <= 1e-3
    ledger = ns.metrics["ledger"]
    assert isinstance(ledger, dict)
    # FSDP reduce-scatters every step's gradients: through the switch, none to gloo.
    rs = ledger["reduce_scatter_single"]
    assert rs["switch (reduce-scatter)"]["calls"] >= STEPS and "gloo" not in rs
    got = counters(rig, list(ns.metrics["job_ids"]))  # type: ignore[call-overload]
    assert sum(c["results_out"] for c in got.values()) > 0
    assert all(c["data_in"] > 0 for c in got.values()), got


def test_ddp_in_bfloat16_through_the_hook_every_bucket_through_the_switch(
        rig: Rig, tmp_path: Path) -> None:
    gloo = run(rig, tmp_path, "gloo", "--dtype", "bfloat16")
    ns = run(rig, tmp_path, "netsum-hook", "--dtype", "bfloat16", "--lanes", "4", "--keep-job")
    assert abs(final_loss(ns) - final_loss(gloo)) <= 1e-3, (final_loss(ns), final_loss(gloo))
    assert gloo.accuracy > 0.25, "the baseline did not learn: the comparison says nothing"
    rows = ns.metrics["steps_log"]
    assert isinstance(rows, list)
    buckets = max(int(r["buckets"]) for r in rows[1:])
    assert 2 <= buckets <= 4, buckets
    # The hook deals bucket i of every step to lane i (one netsum job each): the switch's
    # counters of lane i are bucket i's.
    job_ids = list(ns.metrics["job_ids"])  # type: ignore[call-overload]
    got = counters(rig, job_ids)
    for i, job in enumerate(job_ids):
        if i < buckets:
            assert got[job]["data_in"] >= 2 * STEPS and got[job]["results_out"] >= STEPS, \
                f"bucket {i} (job {job}): {got[job]}"
        else:
            assert got[job]["data_in"] == 0, "a lane no bucket maps to stays idle"
    assert all(int(r["switch_bytes"]) > 0 for r in rows)


@pytest.mark.parametrize("comm", ["netsum-hook", "netsum-backend"])
def test_gradscaler_skips_the_injected_inf_step_on_every_rank_as_with_gloo(
        rig: Rig, tmp_path: Path, comm: str) -> None:
    inject = 7
    gloo = run(rig, tmp_path, "gloo", "--amp", "--inject-inf", str(inject), steps=20)
    ns = run(rig, tmp_path, comm, "--amp", "--inject-inf", str(inject), steps=20)
    for r in range(2):
        want = rank_doc(gloo, tmp_path, r)
        got = rank_doc(ns, tmp_path, r)
        assert inject in want["skipped"]  # type: ignore[operator]
        assert got["skipped"] == want["skipped"], f"rank {r}"
        assert got["scales"] == want["scales"], f"rank {r}"
    assert abs(final_loss(ns) - final_loss(gloo)) <= 1e-3
