"""The worker core's per-packet path compiled: `NativeCore`, a `WorkerCore` whose frames API
runs in C (workers/wcore.c), and `native_status()`, whether it is here and why not.

`NativeCore` is set up by `WorkerCore.__init__` (the plan, the window's frame rows, the
per-block buffers, predictions included), with the exponent proposals and the finiteness
check in one C pass over the input (workers/wquant.c, a module of its own); from
`start_frames` on, acceptance, agreement (or speculation: `predict=`, hits and misses, the
agreed exponents, maxima and retry marks written into the Python core's arrays), each
result's values dequantized straight into the float32 output (the caller's
`out`, `write_into`, or an array of its own: no big-endian sums buffer), RTT/RTO, the
congestion window, fast retransmit, timers and the launches with their quantization run in C
over one slot table that lives across the calls, writing the Python core's own buffers, so
`stats()` and the errors are WorkerCore's; `result()` raises the dequantization's errors
(recorded in C: the lowest block, the lowest offset) as the reference does.  What C does not
handle it hands back frame by frame (SLOW), in order: STATUS frames, REJECTs, garbage, an ACK
for a chunk this rank owns go through the reference's own code.  The frames a call sends are
copied into `frames` (rows of one buffer) as they are queued; a call returns their indices.

The C module is compiled with the switch's native build (netsum/switch/native/build.py: the
machine's C compiler, cached by a hash of the source).  Selection: `allreduce` uses it for
transports with the frames API (`BatchTransport`: UDP tunnel and shared-memory frame ports,
kernel UDP) unless `NETSUM_WORKER_NATIVE=0`; without a C compiler it falls back to the
Python core and `native_status()` says why.  `NETSUM_WORKER_NATIVE=1` makes a missing
compiler an error instead.  tests/unit/test_worker_native.py compares both cores frame by
frame under loss, duplicates and reordering; tests/unit/test_worker_native_spec.py does the
same with speculative exponents (hits, misses, the REJECT of differing predictions).
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib import resources
from types import ModuleType

import numpy as np

from netsum.wire import HEADER_BYTES
from netsum.workers import quant, wire
from netsum.workers.coretypes import AgreementError, CoreState, Step, Stats, Trigger
from netsum.workers.errors import NonFiniteError, ResultError, SumOverflowError
from netsum.workers.core import WorkerCore

__all__ = ["NativeCore", "native_module", "native_status", "ENV"]

ENV = "NETSUM_WORKER_NATIVE"
OK, SLOW, BOOT_NONZERO, AGREE_LOW, AGREE_NONZERO, TIMEOUT, OUT_FULL, SPEC_LOW, RETRY_DIFF = \
    range(9)
# The header layout wcore.c reads and writes (protocol v2); checked before it is used.
_LAYOUT = {"msg_type": 0, "flags": 1, "job_id": 2, "slot": 4, "exp": 6, "count": 7,
           "round": 8, "offset": 12, "workers": 16, "dest": 17, "reason": 18, "klog2": 19,
           "length": 20}
# What wvalues.c + wcore.c + wface.c + wio.c are compiled after: wio.c's system headers come first, with socket.h's
# `accept` renamed (wcore.c has a function of that name).
_PRELUDE = """#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define accept socket_accept_
#include <sys/socket.h>
#undef accept
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
"""
_BATCH = 256        # the transports' largest receive batch (their _DRAIN)
_lock = threading.Lock()
_local = threading.local()
_said: list[str] = []        # the fallback's reason, once logged
log = logging.getLogger("netsum.workers.native")


def _pool() -> dict[int, list[tuple[bytearray, list[memoryview], list[memoryview]]]]:
    """This thread's spare output rows by frame length (see NativeCore.__init__)."""
    pools: dict[int, list[tuple[bytearray, list[memoryview], list[memoryview]]]] | None = \
        getattr(_local, "pools", None)
    if pools is None:
        pools = _local.pools = {}
    return pools
_module: ModuleType | None = None
_qmodule: ModuleType | None = None      # wquant.c: the set-up's per-value passes
_why = ""
#: What both modules are compiled with: floating point as written (no contraction into FMA:
#: the values must be the reference's), and the loop vectoriser's full cost model (-O2's
#: "very cheap" one leaves the per-value loops of a K-value block scalar).
_FLAGS = ("-ffp-contract=off", "-fvect-cost-model=dynamic")


def _load() -> None:
    global _module, _qmodule, _why
    from netsum.switch.native.build import IO_CFLAGS, BuildError, available, build_module
    if wire.OFFSETS != _LAYOUT or HEADER_BYTES != 24:
        _why = "the wire header is not the layout wcore.c was written for"
        return
    why = available()
    if why is not None:
        _why = why
        return
    here = resources.files("netsum.workers")
    gso = resources.files("netsum.switch.native").joinpath("udpgso.h")  # the switch's limits
    text = "".join(here.joinpath(f).read_text() for f in ("wvalues.c", "wcore.c", "wface.c")) + \
        gso.read_text() + "".join(here.joinpath(f).read_text() for f in ("wgso.c", "wio.c"))
    source = _PRELUDE + text
    qsource = "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n" + \
        here.joinpath("wquant.c").read_text()
    try:
        qmod = build_module(qsource, IO_CFLAGS + _FLAGS, prefix="nsq")
        _module = build_module(source, IO_CFLAGS + _FLAGS, prefix="nsk")
        _qmodule = qmod
    except BuildError as exc:
        _why = str(exc)


def native_module() -> ModuleType | None:
    """The compiled module (built on first use, then cached), or None: `native_status()`."""
    with _lock:
        if _module is None and not _why:
            _load()
        return _module


def native_status() -> tuple[bool, str]:
    """(used by allreduce, why not): NETSUM_WORKER_NATIVE=0, or the build's failure."""
    if os.environ.get(ENV, "").strip() == "0":
        return False, f"{ENV}=0"
    mod = native_module()
    if mod is None and os.environ.get(ENV, "").strip() == "1":
        raise RuntimeError(f"{ENV}=1 but the compiled worker core is not here: {_why}")
    if mod is None and not _said:
        _said.append(_why)
        log.warning("the worker core runs in Python: %s", _why)
    return mod is not None, _why


class NativeCore(WorkerCore):
    """A WorkerCore whose frames API (and so its Step API) runs in C; same constructor."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        mod = native_module()
        if mod is None:
            raise RuntimeError(f"the compiled worker core is not here: {_why}")
        self._mod = mod
        win, w, nb, k, t = self._win, self._w, self._nb, self._k, self._timing
        self._rows = np.ascontiguousarray(win._rows, dtype=np.float32)
        self._nat_in = (np.asarray(self._offsets, dtype=np.uint32),
                        np.asarray(self._dests, dtype=np.uint8),
                        np.asarray(self._nf, dtype=np.uint8),
                        np.asarray(self._mine, dtype=np.uint8),
                        self._props)
        self._stride = len(win.frames[0])
        self._hr = self._stride - self._size
        # The result's values, written by C as they come (write_into: the caller's array).
        # np.empty: its pages are touched only where C writes.
        length = self._result_length()
        b0 = self.blocks.blocks_of(self._rank)[0] if self.blocks.shards and \
            self._rank is not None else 0
        self._vals = np.empty(length, dtype=np.float32)
        # agreed, maxima and tried are the Python core's own arrays, written by C in place
        # (result(), stats() and a refusal's qexp read them there)
        self._c = mod.new(win.buf, self._rows, *self._nat_in, self._agreed, self._maxima,
                          self._rflags, self._latency, self._vals, self._pred, self._tried,
                          list(self._slots.round), self._stride,
                          self._hr, w, nb, k, self._job_id, win._shift, t.rto_initial,
                          t.rto_min, t.rto_max, t.backoff, int(t.adaptive), t.initial_window,
                          t.window_min, t.fast_retransmit, b0, length, int(self._spec),
                          self._slack)
        mod.config(self._c, t.progress_deadline, None,
                   int(t.hold_timers and t.fast_retransmit > 0))
        # The output rows: taken from this thread's pool (allocating them and their views
        # each call cost more than a small call's whole work), back in it when the core goes.
        pool = _pool().get(self._stride)
        self._out, self.frames, self._payload_views = pool.pop() if pool else \
            (bytearray(), [], [])
        self._cap = len(self.frames)
        if self._cap:
            mod.set_out(self._c, self._out, self._cap)
        # Enough for any batch a transport hands over (at most _BATCH): the rows never move
        # under a sender that keeps their addresses (workers/mmsg.py keys them on the list).
        need = self._job.num_slots + 2 * _BATCH + 64
        if self._cap < need:
            self._out, self.frames, self._payload_views, self._cap = bytearray(), [], [], 0
            self._grow(need)

    def _propose(self, rows: np.ndarray) -> list[int]:
        """The proposals and the finiteness check in one C pass (wquant.c)."""
        native_module()
        if _qmodule is None:
            raise RuntimeError(f"the compiled worker core is not here: {_why}")
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        self._props = props = np.empty(len(rows), dtype=np.uint8)
        bad = _qmodule.proposals(rows, self._job.k, props)
        if bad >= 0:
            raise NonFiniteError(bad, float(rows.reshape(-1)[bad]))
        out: list[int] = props.tolist()
        return out

    def _sums_buffer(self, size: int) -> bytearray:
        return bytearray()          # the values go straight into the output (wcore.c)

    def write_into(self, out: np.ndarray) -> None:
        super().write_into(out)
        self._mod.config(self._c, self._timing.progress_deadline, out)
        self._vals = out.reshape(-1)

    def _values(self, b0: int, b1: int, length: int) -> np.ndarray:
        """The values C wrote, after quant.dequantize's checks (raised as it raises them)."""
        *_, zero_bad, inf_at, inf_val = self._mod.counters(self._c)
        if zero_bad >= 0:
            raise quant.zero_block_error(zero_bad)
        if inf_at >= 0:
            raise SumOverflowError(inf_at, inf_val)
        return self._vals

    def __del__(self) -> None:
        if not getattr(self, "_cap", 0):
            return                  # __init__ failed before the rows were set up
        pool = _pool().setdefault(self._stride, [])
        if len(pool) < 4:
            self._c = None          # the C state lets go of the buffer first
            pool.append((self._out, self.frames, self._payload_views))

    def _grow(self, rows: int) -> None:
        """Output rows for at least `rows` frames (a call sends at most w + 2 per result).
        `frames` is replaced in place: a driver keeps the list it got at the start (only a
        batch of more than _BATCH frames makes the rows move)."""
        if rows <= self._cap:
            return
        rows = max(rows, 2 * self._cap)
        self._out = bytearray(rows * self._stride)
        mv = memoryview(self._out)
        s, hr = self._stride, self._hr
        self.frames[:] = [mv[j * s:(j + 1) * s] for j in range(rows)]
        self._payload_views[:] = [mv[j * s + hr:(j + 1) * s] for j in range(rows)]
        self._mod.set_out(self._c, self._out, rows)
        self._cap = rows

    # -- the frames API ----------------------------------------------------------------------

    def start_frames(self, now: float) -> list[int]:
        self._check("start")
        self._fire(Trigger.START)
        self._started = self._progress = now
        code, nout = self._mod.start(self._c, now)
        self._after(code)
        return list(range(nout))

    def receive_frames(self, payloads: Sequence[memoryview], n: int, now: float) -> list[int]:
        self._check("receive")
        self._grow(self._w + 2 * n + 64)
        return list(range(self._receive_rest(payloads, 0, n, now, False)))

    def _receive_rest(self, payloads: Sequence[memoryview], j: int, n: int, now: float,
                      cont: bool = True) -> int:
        """payloads[j:n] into the C core (cont: after frames of the same call, whose queued
        frames stay); the frames queued in all."""
        mod, c = self._mod, self._c
        while True:
            code, j, nout = mod.receive(c, payloads, j, n, now, cont)
            self._after(code)
            if code != SLOW:
                return int(nout)
            self._slow(payloads[j], now)
            j, cont = j + 1, True

    def tick_frames(self, now: float) -> list[int]:
        self._check("tick")
        if not self._running:
            return []
        code, nout = self._mod.tick(self._c, now)
        if code == TIMEOUT:
            self._sync()
            self._fire(Trigger.NO_PROGRESS)
            self._timed_out(now)
        self._after(code)
        return list(range(nout))

    def next_deadline(self) -> float | None:
        if not self._running:
            return None
        d: float = self._mod.deadline(self._c)
        return d

    def _after(self, code: int) -> None:
        """State and errors after a C call (the reference's messages)."""
        (*_, running, done, _s, finished, _p, a, b, c, _sp, _z, _i, _v) = \
            self._mod.counters(self._c)
        if done and self._running:
            self._fire(Trigger.LAST_RESULT)
            self._finished = finished
        if code in (OK, SLOW):
            return
        if code == BOOT_NONZERO:
            raise ResultError(
                f"job {self._job_id} slot {a} round {b}: the bootstrap result (a sum "
                f"of zeros) is not zero; the switch added something that was not sent for "
                "this round")
        if code == AGREE_LOW:
            raise AgreementError(
                f"job {self._job_id} slot {a}: result agrees exponent "
                f"{b} for block {c}, below this worker's proposal "
                f"{self._proposals[c]}; the switch must return max(exp)")
        if code == AGREE_NONZERO:
            raise AgreementError(
                f"job {self._job_id} slot {a}: result agrees exponent {b} where every "
                f"worker proposed 0 (no block follows); the switch must return max(exp)")
        if code == SPEC_LOW:
            raise AgreementError(
                f"job {self._job_id} slot {a}: result says exponent {b} is the max of the "
                f"proposals for block {c}, below this worker's own proposal "
                f"{self._proposals[c]}; the switch must return max(exp)")
        if code == RETRY_DIFF:
            raise AgreementError(
                f"job {self._job_id} slot {a}: block {c} was sent again with the "
                f"exponent {self._agreed[c]} its first result agreed, and its second "
                f"result says {b}; the data did not change, so the max cannot")
        raise RuntimeError(f"compiled worker core: internal error {code}")

    def _slow(self, view: memoryview, now: float) -> None:
        """A frame C leaves to the reference: the Python core's own handling of it, with
        the slot table copied over first (a REJECT names the use it refused)."""
        self._sync()
        out: list[int] = []
        if len(view) == HEADER_BYTES:
            self._take_bare(memoryview(view), now, out)
        elif len(view) == self._size:
            self._take(memoryview(view), now, out)
        else:
            self._reject(bytes(view))
        assert not out, "the reference sent for a frame the compiled core left to it"

    def _held(self, slot: int, round_: int) -> None:
        """A STATUS for (slot, round_): to the C core's held timers (WorkerCore.on_status)."""
        self._mod.status(self._c, slot, round_)

    def _sync(self) -> None:
        """The Python core's view of the C state (for its messages, stats and rounds)."""
        (self._sent, self._retx, self._boot, self._results, self._dups, self._stale,
         self._chunks, self._fast, self._misses, _r, _d, self._started, finished, self._progress,
         _a, _b, _c, self._rec.spurious, _z, _i, _v) = self._mod.counters(self._c)
        if _d:
            self._finished = finished
        cur, rounds, want, nxt = self._mod.slots(self._c)
        # Before start() the rounds are the slot table's own (C's `cur` is not set yet).
        self._slots.mirror(cur, rounds if self._state is not CoreState.IDLE else nxt, want)

    # -- the Step API and the results over the C state ---------------------------------------

    def _step(self, slots: list[int]) -> Step:
        views = self._payload_views
        ev = self._ev
        self._ev = None
        return Step(tuple(bytes(views[i]) for i in slots), tuple(ev or ()))

    def receive(self, payload: bytes, now: float) -> Step:
        self._check("receive")
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            self._reject(payload)
            return Step((), ())
        return self._step(self.receive_frames([memoryview(payload)], 1, now))

    def stats(self, now: float | None = None) -> Stats:
        self._sync()
        return super().stats(now)

    def next_rounds(self) -> tuple[int, ...]:
        self._sync()
        return super().next_rounds()
