"""Tensors to and from the lane engine: dtypes and devices (torch).

The switch carries float32 block floating point (docs/quantization.md); every float dtype goes
through it the same way and comes back in its own dtype:

* float32 as it is; float16 as it is (numpy has it; every float16 is a float32); bfloat16
  widened to float32 (exact: bf16 is float32's upper half); float64 as it is (the quantizer
  carries it to float32 precision, and refuses, on every rank at once, a value beyond
  float32's range);
* the sum comes back float32 and is rounded once into the tensor's dtype by `Tensor.copy_`
  (round to nearest even): the per-dtype error bound of docs/quantization.md.

Devices: a CPU tensor is read and written in place.  A CUDA tensor is *staged* through pinned
host memory, as SwitchML-class systems do: copied out on the tensor's current stream (the
engine reads the copy once that copy's event has completed), summed, and copied back on the
same stream, which the lane thread waits for before the collective's future completes, so the
sum is on the device for every stream once `wait()` returns.  The device
touches are three methods of `CudaStage` (`_to_host`, `_wait`, `_to_device`): the unit tests
replace exactly those (the project has no GPU), and tests/unit/test_training_staging.py has a
real-GPU test that runs when CUDA is there and skips saying why otherwise.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["Stage", "CpuStage", "CudaStage", "stage_for", "FLOAT_DTYPES"]

#: The dtypes that go through the switch.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _host_array(t: torch.Tensor) -> np.ndarray:
    """A flat numpy copy of a CPU tensor in a dtype numpy has (bf16 widened to float32)."""
    flat = t.detach().reshape(-1)
    if flat.dtype == torch.bfloat16:
        return flat.float().numpy()          # a new array already
    return flat.numpy().copy()


class Stage:
    """How one tensor's values reach the engine and its sum comes back."""

    devices: list[torch.device] = []

    def read(self, t: torch.Tensor) -> np.ndarray:
        raise NotImplementedError

    def write(self, t: torch.Tensor, values: np.ndarray) -> None:
        """`values`: float32, t.numel() of them, written into t in t's dtype."""
        raise NotImplementedError


class CpuStage(Stage):
    devices: list[torch.device] = []

    def read(self, t: torch.Tensor) -> np.ndarray:
        return _host_array(t)

    def write(self, t: torch.Tensor, values: np.ndarray) -> None:
        with torch.no_grad():
            t.copy_(torch.from_numpy(values).reshape(t.shape))


class CudaStage(Stage):
    """One per call: remembers the stream the copy out was queued on, for the copy back."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.devices = [device]
        self.stream: Any = None

    def read(self, t: torch.Tensor) -> np.ndarray:
        host, event = self._to_host(t)
        self._wait(event)
        return _host_array(host)

    def write(self, t: torch.Tensor, values: np.ndarray) -> None:
        host = torch.from_numpy(values).reshape(t.shape).to(t.dtype)
        self._to_device(host, t)

    # -- the copy boundary (replaced in the CPU-only unit tests) ----------------------------
    def _to_host(self, t: torch.Tensor) -> tuple[torch.Tensor, Any]:
        self.stream = torch.cuda.current_stream(t.device)
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        with torch.cuda.stream(self.stream):
            host.copy_(t.detach(), non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        return host, event

    def _wait(self, event: Any) -> None:
        event.synchronize()

    def _to_device(self, host: torch.Tensor, t: torch.Tensor) -> None:
        pinned = host.pin_memory()
        with torch.cuda.stream(self.stream), torch.no_grad():
            t.copy_(pinned, non_blocking=True)
        # The future completes in a lane thread, whose current stream is not this one: wait
        # for the copy here, so the sum is on the device for every stream once it completes.
        self.stream.synchronize()


def stage_for(t: torch.Tensor) -> Stage:
    """The stage of one call on `t` (a new CudaStage per call: it keeps that call's stream)."""
    if t.device.type == "cuda":
        return CudaStage(t.device)
    if t.device.type != "cpu":
        raise TypeError(f"netsum: {t.device.type} tensors are not supported (CPU and CUDA are)")
    return CpuStage()
