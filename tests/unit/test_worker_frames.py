"""The worker's hot path sends exactly the bytes of the straightforward encoder.

The core keeps every slot's frame in one buffer per window and writes only what changes
(workers/window.py: header words in place, blocks quantized by numpy straight into the
big-endian rows, RETX flipped in the row).  Here every frame it hands to a transport - through
the frames API with a random link-layer prefix, and through the Step API - is compared byte
for byte with what this test expects from the inputs alone: the schedule (slot i carries the
bootstrap use, then blocks i, i + W, ...; each use the slot's next round, wrapping at 2^32),
the exponent proposals and agreed exponents worked out here with math.frexp, the integers
worked out here in exact Python arithmetic (round half to even of x * 2^(s - E)), and the
packet encoded by `wire.encode`.  A retransmission must be the same bytes with RETX set.

The inputs are random and awkward on purpose: partial last blocks, zero blocks, subnormals,
exponents down to 2^-149 (whose scale factor is beyond float32: the float64 path), wide
dynamic range within a block (products that underflow), both signs of halves; the switch in
the loop sums correctly but loses and duplicates packets, so timers and fast retransmit fire,
and results arrive in batches of random size whose buffers are overwritten after each call.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from netsum.wire import EXP_BIAS, EXP_ZERO, HEADER_BYTES, K_SUPPORTED, Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import CoreState, JobConfig, Timing, WorkerCore

_SPAN = 1 << 32
TIMING = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=30.0)


def awkward_tensor(rng: np.random.Generator, length: int, k: int, shift: int) -> np.ndarray:
    x = rng.standard_normal(length) * np.exp2(rng.integers(-30, 30, length))
    nb = -(-length // k)
    for b in range(nb):
        part = slice(b * k, min((b + 1) * k, length))
        kind = rng.integers(8)
        if kind == 0:
            x[part] = 0.0
        elif kind == 1:      # tiny: E - BIAS below s - 127, beyond float32's factor
            x[part] = rng.standard_normal(part.stop - part.start) * 2.0 ** rng.integers(-149, -95)
        elif kind == 2:      # one large value, the rest underflows to zero or to halves
            x[part] = rng.standard_normal(part.stop - part.start) * 2.0 ** -40
            x[part.start] = 2.0 ** rng.integers(0, 60)
        elif kind == 3:      # exact halves of the quantum: round half to even decides
            x[part] = (rng.integers(-64, 64, part.stop - part.start) + 0.5) * 2.0 ** -shift
            x[part.start] = 1.0
        elif kind == 4:      # a power of two as the peak (its proposal is that exponent)
            x[part.start] = -(2.0 ** rng.integers(-20, 20))
    x[rng.random(length) < 0.05] = 0.0
    return x.astype(np.float32)


def proposal(block: np.ndarray) -> int:
    """Biased exponent E with 2^(E-BIAS) >= max|x| > 2^(E-BIAS-1); EXP_ZERO for zeros."""
    peak = max(abs(float(v)) for v in block)
    if peak == 0.0:
        return EXP_ZERO
    mant, e = math.frexp(peak)
    e -= mant == 0.5
    return min(max(e + EXP_BIAS, 1), 255)


def integers(block: np.ndarray, agreed: int, shift: int) -> np.ndarray:
    if agreed == EXP_ZERO:
        return np.zeros(len(block), dtype=np.int32)
    return np.array([round(math.ldexp(float(v), shift - (agreed - EXP_BIAS))) for v in block],
                    dtype=np.int32)


class Expected:
    """What each of one worker's slots must send next, from the inputs alone."""

    def __init__(self, xs: list[np.ndarray], me: int, job: JobConfig, rounds: list[int]) -> None:
        k = job.k
        length = len(xs[me])
        nb = -(-length // k)
        pad = [np.concatenate([x, np.zeros(nb * k - length, np.float32)]).reshape(nb, k)
               for x in xs]
        self.props = [[proposal(p[b]) for b in range(nb)] for p in pad]
        self.agreed = [max(p[b] for p in self.props) for b in range(nb)]
        shift = (((1 << 31) - 1) // job.num_workers).bit_length() - 1
        self.w = w = min(job.num_slots, nb)
        self.job, self.nb, self.k = job, nb, k
        self.length = length
        self.rows = pad[me]
        self.shift = shift
        self.me = me
        self.use = [-1] * w                     # uses sent so far per slot (-1: none)
        self.rounds = rounds
        self.current: list[bytes | None] = [None] * w

    def packet(self, i: int, use: int, flags: Flags) -> bytes:
        block = i + (use - 1) * self.w          # use 0: the bootstrap (block i - W)
        ahead = block + self.w
        exp = self.props[self.me][ahead] if ahead < self.nb else EXP_ZERO
        values = integers(self.rows[block], self.agreed[block], self.shift) if block >= 0 \
            else np.zeros(self.k, dtype=np.int32)
        # protocol v2: the member count, log2 K and tensor length in every DATA; an
        # all-reduce's every block to every rank
        head = wire.Header(msg_type=MsgType.DATA, flags=flags, job_id=self.job.job_id, slot=i,
                           exp=exp, count=0, round=(self.rounds[i] + use) % _SPAN,
                           offset=(block if block >= 0 else ahead) * self.k,
                           workers=self.job.num_workers, dest=0xFF,
                           # byte 18: the exponent the values are quantized with (0: zeros)
                           reason=self.agreed[block] if block >= 0 else EXP_ZERO,
                           klog2=self.k.bit_length() - 1, length=self.length)
        return wire.encode(head, values, self.k)

    def check(self, i: int, sent: bytes) -> None:
        """`sent` is slot i's next use, or the current one again with RETX."""
        cur = self.current[i]
        if cur is not None and sent == self.packet(i, self.use[i], Flags.RETX):
            return
        nxt = self.use[i] + 1
        assert i + (nxt - 1) * self.w < self.nb, f"slot {i}: a use past the last block"
        want = self.packet(i, nxt, Flags.NONE)
        if sent != want:
            diff = next(j for j in range(len(want)) if j >= len(sent) or sent[j] != want[j])
            raise AssertionError(f"worker {self.me} slot {i} use {nxt}: byte {diff} differs "
                                 f"(sent {sent[diff:diff + 8].hex()}, expected "
                                 f"{want[diff:diff + 8].hex()})")
        self.use[i] = nxt
        self.current[i] = want


class SummingSwitch:
    """Adds each (slot, round)'s contributions once per worker (int32 wrap-around, max
    exponent) and answers every worker with the RESULT, a duplicate of a done use only its
    sender.  Loses and duplicates packets both ways."""

    def __init__(self, rng: np.random.Generator, job: JobConfig, loss: float) -> None:
        self.rng, self.job, self.loss = rng, job, loss
        self.uses: dict[tuple[int, int], dict[int, wire.Packet]] = {}

    def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
        if self.rng.random() < self.loss:
            return []
        pkt = wire.decode(payload, self.job.k)
        h = pkt.header
        got = self.uses.setdefault((h.slot, h.round), {})
        done = len(got) == self.job.num_workers
        got.setdefault(src, pkt)
        if len(got) < self.job.num_workers:
            return []
        total = np.zeros(self.job.k, dtype=np.int64)
        for p in got.values():
            total += p.values
        head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id,
                           slot=h.slot, exp=max(p.header.exp for p in got.values()),
                           count=len(got), round=h.round, offset=h.offset)
        result = wire.encode(head, total.astype(np.int32), self.job.k)
        dests = [src] if done else list(range(self.job.num_workers))
        out = []
        for d in dests:
            if self.rng.random() >= self.loss:
                out += [(d, result)] * (2 if self.rng.random() < 0.05 else 1)
        return out


def run(seed: int, face: str) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.choice(K_SUPPORTED))
    n = int(rng.integers(1, 5))
    length = int(rng.integers(1, 40)) * k + int(rng.integers(0, k))
    job = JobConfig(int(rng.integers(0, 1 << 16)), n, int(rng.integers(1, 24)), k)
    # Rounds near the 32-bit wrap for some slots, small for others.
    rounds = [int(r) for r in rng.choice([0, 1, _SPAN - 1, _SPAN - 3, 12345], job.num_slots)]
    shift = (((1 << 31) - 1) // n).bit_length() - 1
    xs = [awkward_tensor(rng, length, k, shift) for _ in range(n)]
    prefix = rng.integers(0, 256, int(rng.choice([0, 42]))).astype(np.uint8).tobytes() \
        if face == "frames" else b""
    cores = [WorkerCore(x, job, TIMING, rounds, prefix) if face == "frames"
             else WorkerCore(x, job, TIMING, rounds) for x in xs]
    expect = [Expected(xs, w, job, rounds) for w in range(n)]
    switch = SummingSwitch(rng, job, loss=0.1)
    inbox: list[list[bytes]] = [[] for _ in range(n)]
    size = cores[0].packet_bytes
    rx = [memoryview(bytearray(size)) for _ in range(8)]
    now = 0.0

    def send_frames(w: int, slots: list[int]) -> None:
        for i in slots:
            # i >= W: a copy of a row that changed after this call queued it (core._keep)
            frame = bytes(cores[w].frames[i])
            assert frame[:len(prefix)] == prefix, "the link-layer prefix changed"
            payload = frame[len(prefix):]
            expect[w].check(wire.decode_header(payload, k).slot, payload)
            for d, out in switch.process(w, payload):
                inbox[d].append(out)

    def send_steps(w: int, payloads: tuple[bytes, ...]) -> None:
        for payload in payloads:
            slot = wire.decode_header(payload, k).slot
            expect[w].check(slot, payload)
            for d, out in switch.process(w, payload):
                inbox[d].append(out)

    for w, core in enumerate(cores):
        if face == "frames":
            send_frames(w, core.start_frames(now))
        else:
            send_steps(w, core.start(now).send)
    for _ in range(200_000):
        if all(c.state is CoreState.DONE for c in cores):
            break
        now += 1e-5
        busy = [w for w in range(n) if inbox[w]]
        if not busy:
            now = max(now, min(d for c in cores if (d := c.next_deadline()) is not None))
            for w, core in enumerate(cores):
                if face == "frames":
                    send_frames(w, core.tick_frames(now))
                else:
                    send_steps(w, core.tick(now).send)
            continue
        w = int(rng.choice(busy))
        take = int(rng.integers(1, min(len(inbox[w]), len(rx)) + 1))
        batch, inbox[w] = inbox[w][:take], inbox[w][take:]
        if face == "frames":
            for j, payload in enumerate(batch):
                rx[j][:] = payload
            slots = cores[w].receive_frames(rx, take, now)
            for j in range(take):          # the transport reuses its buffers at once
                rx[j][:] = bytes([0xA5]) * size
            send_frames(w, slots)
        else:
            for payload in batch:
                send_steps(w, cores[w].receive(payload, now).send)
    else:
        raise AssertionError("the job did not finish")
    # Every use of every slot went out, and the sums are the exact ones.
    scale = [math.ldexp(1.0, e - EXP_BIAS - expect[0].shift) if e != EXP_ZERO else 0.0
             for e in expect[0].agreed]
    total = sum(np.stack([integers(e.rows[b], e.agreed[b], e.shift) for b in range(e.nb)])
                .astype(np.int64) for e in expect)
    want = (total * np.array(scale)[:, None]).astype(np.float32).reshape(-1)[:length]
    for w, core in enumerate(cores):
        assert expect[w].use == [1 + (expect[w].nb - 1 - i) // expect[w].w
                                 for i in range(expect[w].w)]
        np.testing.assert_array_equal(core.result().tensor, want)
        assert core.next_rounds()[:expect[w].w] == tuple(
            (rounds[i] + u + 1) % _SPAN for i, u in enumerate(expect[w].use))


@pytest.mark.parametrize("face", ["frames", "steps"])
@pytest.mark.parametrize("seed", range(12))
def test_frames_equal_the_straightforward_encoder(seed: int, face: str) -> None:
    run(seed, face)


def test_window_rows_from_the_template_carry_each_calls_own_fields() -> None:
    """TxWindow copies its rows from a template kept per shape of call: each window's header
    fields are its own call's (job, slot, workers, length, prefix), its values zeros, and
    writing one window's rows never shows in a later window's."""
    from netsum.workers.window import TxWindow
    k, w = 32, 4
    for length, job_id, workers, prefix in [(100, 5, 4, b"\x01" * 42), (99, 5, 4, b"\x01" * 42),
                                            (100, 6, 4, b"\x01" * 42), (100, 5, 3, b""),
                                            (100, 5, 4, b"\x01" * 42)]:
        win = TxWindow(np.zeros((w, k), np.float32), job_id, w, 0, prefix, workers=workers,
                       length=length)
        for i in range(w):
            h = wire.decode_header(bytes(win.payloads[i]), k)
            assert (h.job_id, h.slot, h.workers, h.length) == (job_id, i, workers, length)
            assert bytes(win.frames[i][:len(prefix)]) == prefix
            assert not any(bytes(win.payloads[i][HEADER_BYTES:]))
        win.buf[:] = b"\xff" * len(win.buf)         # a used window's rows: not the next one's
