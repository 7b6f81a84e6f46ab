"""Tensors of every float dtype and device through the lane engine (netsum.training.staging):
the per-dtype error bound of docs/quantization.md against an independent float64 reference,
and CUDA staging through pinned host memory -- on CPU with the device path replaced only at the
copy boundary (the three methods of CudaStage that touch a device), and on a real GPU when
there is one.

Two engines play two ranks over the test oracle of the switch, with the real worker core.  The
expectations come from the inputs: their float64 sum, and the bound computed here from their
block maxima.
"""
from __future__ import annotations

import math
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

from netsum.training.lanes import LaneEngine, LaneResult  # noqa: E402
from netsum.training.staging import CpuStage, CudaStage, Stage, stage_for  # noqa: E402
from test_training_lanes import K, engines  # noqa: E402

#: unit roundoff and half the smallest subnormal step of each dtype
ROUNDING = {torch.float32: (0.0, 0.0), torch.bfloat16: (2.0 ** -8, 2.0 ** -134),
            torch.float16: (2.0 ** -11, 2.0 ** -25), torch.float64: (0.0, 0.0)}


def dtype_bound(xs: list[np.ndarray], dtype: Any) -> np.ndarray:
    """docs/quantization.md, "Per dtype": the quantization term n 2^(E-s-1) with E from the
    inputs as float32, the float32 rounding of the sum 2^-24 |S|, then the dtype's own
    rounding u |S| + eta; float64 inputs are first rounded to float32 (2^-24 sum |x_r|)."""
    n = len(xs)
    s = max(t for t in range(64) if n * 2 ** t <= 2 ** 31 - 1)
    x32 = [x.astype(np.float32).astype(np.float64) for x in xs]
    total = np.sum(np.stack(xs), axis=0)
    out = np.zeros(len(total))
    for b in range(0, len(total), K):
        peak = max(float(np.max(np.abs(x[b:b + K]))) for x in x32)
        if peak > 0:
            out[b:b + K] = n * 2.0 ** (min(max(math.ceil(math.log2(peak)), -126), 128) - s - 1)
    u, eta = ROUNDING[dtype]
    out += 2.0 ** -24 * np.abs(total) * (1 + u) + u * np.abs(total) + eta
    if dtype == torch.float64:
        out += 2.0 ** -24 * np.sum(np.abs(np.stack(xs)), axis=0)
    return out


def allreduce(engine: LaneEngine, stage: Stage, t: Any) -> Future[LaneResult]:
    """What the hook and the backend do with one tensor: read, submit, write the sum back."""
    fut = engine.submit(stage.read(t), "t")
    written: Future[LaneResult] = Future()

    def write(f: Future[LaneResult]) -> None:
        # Done callbacks run after waiters wake: the caller waits for `written` instead.
        try:
            stage.write(t, f.result().tensor)
            written.set_result(f.result())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            written.set_exception(exc)

    fut.add_done_callback(write)
    return written


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=str)
def test_every_float_dtype_comes_back_in_its_dtype_within_its_bound(dtype: Any) -> None:
    link, (a, b) = engines(lanes=2)
    gen = torch.Generator().manual_seed(5)
    try:
        for length in (1, K - 1, 3 * K + 5, 1000):
            mags = 10.0 ** torch.randint(-3, 3, (2, length), generator=gen)
            xs = [(torch.randn(length, generator=gen) * mags[r]).to(dtype) for r in range(2)]
            ref = [x.double().numpy().copy() for x in xs]   # the inputs, exactly, in float64
            futs = [allreduce(e, stage_for(x), x) for e, x in zip((a, b), xs)]
            for f in futs:
                f.result(timeout=30)
            for x in xs:
                assert x.dtype == dtype
            got = xs[0].double().numpy()
            assert np.array_equal(got, xs[1].double().numpy()), "the ranks disagree"
            diff = np.abs(got - (ref[0] + ref[1]))
            worst = float(np.max(diff / dtype_bound(ref, dtype)))
            assert worst <= 1.0, f"{dtype} length {length}: {worst:.2f} x the bound"
    finally:
        a.close()
        b.close()


def test_the_bound_is_not_vacuous_for_bf16() -> None:
    """The bf16 bound is bf16's own rounding (2^-8 relative) plus a term far below it: a
    result off by one bf16 ulp more than rounding would exceed it."""
    xs = [np.array([1.0, 3.0]), np.array([2.0 ** -7, 0.0])]
    bound = dtype_bound(xs, torch.bfloat16)
    assert np.all(bound < 2.0 ** -7 * np.abs(xs[0] + xs[1]))


class FakeCudaStage(CudaStage):
    """CudaStage with the device replaced at its copy boundary by CPU copies that record what
    was called, in order, and on which stream."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__(torch.device("cpu"))
        self.devices = []
        self.calls = calls

    def _to_host(self, t: Any) -> tuple[Any, Any]:
        self.stream = f"stream-of-{id(t)}"
        self.calls.append(f"to_host on {self.stream}")
        return t.detach().clone(), "event"

    def _wait(self, event: Any) -> None:
        self.calls.append(f"wait {event}")

    def _to_device(self, host: Any, t: Any) -> None:
        self.calls.append(f"to_device on {self.stream}")
        assert host.dtype == t.dtype, "the copy back is in the tensor's dtype"
        with torch.no_grad():
            t.copy_(host)


def test_cuda_tensors_are_staged_out_summed_and_copied_back_on_their_stream() -> None:
    link, (a, b) = engines(lanes=1)
    xs = [torch.arange(100, dtype=torch.bfloat16) * (r + 1) for r in range(2)]
    want = (xs[0].double() + xs[1].double()).to(torch.bfloat16)
    calls: list[list[str]] = [[], []]
    try:
        stages = [FakeCudaStage(calls[r]) for r in range(2)]
        futs = [allreduce(e, s, x) for e, s, x in zip((a, b), stages, xs)]
        for f in futs:
            f.result(timeout=30)
    finally:
        a.close()
        b.close()
    for r in range(2):
        assert torch.equal(xs[r], want)
        s = f"stream-of-{id(xs[r])}"
        assert calls[r] == [f"to_host on {s}", "wait event", f"to_device on {s}"]


def test_stage_for_picks_by_device_and_refuses_others() -> None:
    assert isinstance(stage_for(torch.zeros(2)), CpuStage)
    with pytest.raises(TypeError, match="meta tensors are not supported"):
        stage_for(torch.zeros(2, device="meta"))


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device on this machine (CPU-only torch build or no GPU): "
                    "the staging path is covered above with the copy boundary replaced")
def test_real_gpu_tensors_through_pinned_memory() -> None:
    link, (a, b) = engines(lanes=1)
    stream = torch.cuda.Stream()
    xs = [torch.arange(3000, device="cuda", dtype=torch.float32) * (r + 1) for r in range(2)]
    try:
        with torch.cuda.stream(stream):
            stages = [stage_for(x) for x in xs]
            futs = [allreduce(e, s, x) for e, s, x in zip((a, b), stages, xs)]
            for f in futs:
                f.result(timeout=60)
        stream.synchronize()
    finally:
        a.close()
        b.close()
    for s in stages:
        assert isinstance(s, CudaStage) and s.stream == stream
    want = torch.arange(3000, dtype=torch.float32) * 3
    for x in xs:
        assert x.is_cuda and torch.equal(x.cpu(), want)
