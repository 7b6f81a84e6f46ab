"""netsum workers: the header codec (`wire`; the protocol's definition is `netsum.wire`), block
floating point quantization, the sans-I/O worker core, transports and the allreduce API.

    from netsum.workers import allreduce, JobConfig, UdpTransport
    with UdpTransport(service=("10.0.0.254", UDP_PORT)) as t:
        result = allreduce(grad, t, JobConfig(job_id=1, num_workers=4, num_slots=256))
    result.tensor, result.stats
"""
from __future__ import annotations

from netsum.wire import K_DEFAULT, MAX_WORKERS, UDP_PORT
from netsum.workers.api import Worker, allreduce, reduce_scatter
from netsum.workers.blocks import BlockPlan, plan_blocks
from netsum.workers.core import AllreduceResult, JobConfig, Stats, Timing, WorkerCore
from netsum.workers.errors import (NonFiniteError, ProtocolStateError, QuantError, RejectedError,
                            ResultError, SumOverflowError, TransportError, WireError,
                            WorkerError, WorkerTimeoutError)
from netsum.workers.transport import FrameTransport, Transport, UdpTransport
from netsum.workers.wire import Endpoint

__all__ = [
    "allreduce", "reduce_scatter", "Worker", "AllreduceResult", "BlockPlan", "plan_blocks",
    "JobConfig", "Stats", "Timing", "WorkerCore",
    "Transport", "UdpTransport", "FrameTransport", "Endpoint",
    "WorkerError", "WireError", "QuantError", "NonFiniteError", "SumOverflowError",
    "ProtocolStateError", "WorkerTimeoutError", "TransportError", "ResultError", "RejectedError",
    "UDP_PORT", "K_DEFAULT", "MAX_WORKERS",
]
