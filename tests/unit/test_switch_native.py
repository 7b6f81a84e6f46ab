"""Differential tests of the native backend (netsum/switch/native): every program it accepts must
give the same bytes out, the same register and counter cells and the same statistics as the
Python path (`Pipeline(native=False)`, itself checked against the unoptimised code and
tests/bmv2ref.py), for random programs, every fixture program, netsum.p4 at every K under
random streams with control-plane changes in between, and malformed frames; netsum.p4 also
directly against the independent interpreter.  A program it does not accept, or a build
that fails, must leave a working switch on the Python path with the reason in
`Pipeline.native_status`."""
from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bmv2ref import Reference
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline
from netsum.switch.replication import Replica
from test_switch_diff_fuse import H, _program_files, _small, fixture_frames, random_program
from test_switch_lanes import Gen, _frame
from netsum.wire import K_SUPPORTED

WHY = build.available()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
ROUTER_JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"


def _devices(j: dict[str, Any], seed: int = 3) -> tuple[Device, Device]:
    """(Python path, native) devices of one program, both seeded alike."""
    out = []
    for native in (False, True):
        d = Device(seed=seed)
        d.install(Pipeline(json.loads(json.dumps(j)), native=native))
        out.append(d)
    return out[0], out[1]


def _state(dev: Device) -> tuple[Any, ...]:
    pl = dev.pipeline
    assert pl is not None
    return (tuple((n, tuple(int(x) for x in r.values)) for n, r in pl.registers.items()),
            tuple((n, tuple(int(x) for x in c.packets), tuple(int(x) for x in c.bytes))
                  for n, c in pl.counters.items()))


def _same(py: Device, nat: Device, port: int, frame: bytes, what: object) -> list[Any]:
    want = py.process(port, frame)
    got = nat.process(port, frame)
    assert got == want, what
    return got


def _agree(py: Device, nat: Device, what: object) -> None:
    assert _state(py) == _state(nat), what
    assert py.stats.as_dict() == nat.stats.as_dict(), what
    assert nat.stats.internal_errors == 0, what


def _native(dev: Device) -> bool:
    return dev.pipeline is not None and dev.pipeline.native is not None


@pytest.mark.slow
def test_random_register_programs_agree_with_the_python_path() -> None:
    """Register reads/writes/counts with random index expressions, signed and out-of-range
    indices, if/else in p4c's jump encoding (test_switch_diff_fuse's generator)."""
    for seed in range(16):
        py, nat = _devices(random_program(seed))
        assert _native(nat), (seed, nat.pipeline and nat.pipeline.native_status)
        rng = random.Random(seed)
        for _ in range(40):
            frame = H.pack(_small(rng, 8), _small(rng, 16), _small(rng, 32), _small(rng, 32))
            if rng.random() < 0.1:
                frame = frame[:rng.randrange(len(frame))]
            _same(py, nat, 2, frame, seed)
        _agree(py, nat, seed)


@pytest.mark.slow
def test_random_lane_programs_agree_with_the_python_path() -> None:
    """Lane runs over fields and registers of 8-32 bits, temporaries, shifts, constants above
    2^32, deliberate defects (test_switch_lanes's generator)."""
    for seed in range(16):
        g = Gen(seed)
        py, nat = _devices(g.program(), seed=5)
        assert _native(nat), (seed, nat.pipeline and nat.pipeline.native_status)
        rng = random.Random(seed)
        for _ in range(30):
            frame = _frame(rng, g.lanes, g.width)
            _same(py, nat, 2, frame, seed)
        _agree(py, nat, seed)


@pytest.mark.slow
def test_fixture_programs_agree_or_decline_with_a_reason(p4c_fixtures: Path) -> None:
    """Every hand-written, real-p4c and netsum-p4c program of the suite (stacks, unions, lpm
    and ternary tables, checksums, hashes, clones, jumps) with default actions: accepted ones
    agree frame by frame; declined ones say why and still forward on the Python path."""
    rng = random.Random(11)
    seeds = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 160))) for _ in range(60)]
    accepted, declined = [], []
    for path in _program_files(p4c_fixtures):
        j = json.loads(path.read_text())
        py, nat = _devices(j)
        assert nat.pipeline is not None
        status = nat.pipeline.native_status
        if _native(nat):
            accepted.append(path.name)
        else:
            assert status.startswith("declined: ") and len(status) > 12, (path.name, status)
            declined.append(path.name)
        for frame in fixture_frames(rng, seeds, 200):
            _same(py, nat, rng.randrange(1, 8), frame, path.name)
        _agree(py, nat, path.name)
    assert len(accepted) >= 10 and "router.json" in accepted, (accepted, declined)


def _netsum(k: int, native: bool) -> Any:
    import p4helpers as helpers
    cfg = helpers.netsum_config(k)
    sw = helpers.NetsumSwitch(cfg, pipeline=Pipeline(json.loads(cfg), native=native))
    sw.add_job(3, [helpers.worker_host(i) for i in range(4)], num_slots=8)
    return sw


EXTREMES = np.array([-(1 << 31), (1 << 31) - 1, -1, 0, 1], dtype=np.int64)


def _stream(helpers: Any, rng: random.Random, k: int, hosts: list[Any], cur: list[int]
            ) -> list[tuple[Any, bytes]]:
    """One step of a random stream: often a whole round of one slot from the four members
    in random order (so aggregates complete), else a single packet; any frame may be cut
    short or have a header byte changed."""
    slot = rng.randrange(len(cur))
    roll = rng.random()
    if roll < 0.15:
        cur[slot] += 1                                  # the slot's next use
    rnd = cur[slot] - 1 if roll > 0.95 else cur[slot]   # now and then a stale round
    senders = rng.sample(hosts[:4], 4) if rng.random() < 0.4 else [rng.choice(hosts)]
    out = []
    for h in senders:
        # numpy draws the K values (seeded from `rng`): a value per rng call made the stream
        # at K=2048 cost more than the two switches it tests
        gen = np.random.default_rng(rng.getrandbits(64))
        draw = gen.integers(-(1 << 31), 1 << 31, size=k, dtype=np.int64)
        edge = gen.random(k) < 0.3
        draw[edge] = gen.choice(EXTREMES, size=int(edge.sum()))
        vals = draw.tolist()
        frame = helpers.netsum_frame(h, job_id=rng.choice([3, 3, 3, 3, 7]), slot=slot,
                                     round=rnd & 0xFFFFFFFF, values=vals, exp=rng.randrange(256),
                                     flags=rng.choice([0, 1]),
                                     msg_type=rng.choice([1, 1, 1, 1, 1, 2]))
        roll = rng.random()
        if roll < 0.06:                 # cut short anywhere: parser errors on every header
            frame = frame[:rng.randrange(len(frame))]
        elif roll < 0.1:                # another ethertype / protocol / port / ihl / version
            at = rng.choice([12, 13, 14, 23, 36, 37, 42])
            frame = frame[:at] + bytes([rng.randrange(256)]) + frame[at + 1:]
        out.append((h, frame))
    return out


@pytest.mark.parametrize("k", [pytest.param(k, marks=pytest.mark.slow) if k >= 1024 else k
                               for k in K_SUPPORTED])
def test_netsum_p4_random_stream_agrees_at_every_k(k: int) -> None:
    """Members, a non-member, an unknown job, stale and repeated rounds, results, truncated
    and corrupted frames; halfway a member leaves and comes back and the multicast group is
    rewritten, so the tables and groups reloaded into C are exercised as well."""
    import p4helpers as helpers
    py, nat = _netsum(k, False), _netsum(k, True)
    assert nat.pipeline.native is not None, nat.pipeline.native_status
    rng = random.Random(k)
    hosts = [helpers.worker_host(i) for i in range(5)]            # the fifth is no member
    cur = [0] * 4
    results = 0
    gone = [sw.pipeline.tables["NetsumIngress.member"].entries()[0] for sw in (py, nat)]
    for n in range(400):
        if n in (100, 150):
            for sw, e in zip((py, nat), gone):
                t = sw.pipeline.tables["NetsumIngress.member"]
                t.delete(e.key, e.priority) if n == 100 else t.insert(e)
        if n == 250:
            for sw in (py, nat):
                sw.pipeline.pre.mc_group_modify(103, [Replica(p, p) for p in (1, 2, 3)])
        for h, frame in _stream(helpers, rng, k, hosts, cur):
            results += len(_same(py.device, nat.device, h.port, frame, n))
    assert results > 100                                # aggregates really went out
    _agree(py.device, nat.device, k)


@pytest.mark.parametrize("k", [32, 256])
def test_netsum_p4_native_agrees_with_the_independent_interpreter(k: int) -> None:
    import p4helpers as helpers
    sw = _netsum(k, True)
    assert sw.pipeline.native is not None, sw.pipeline.native_status
    ref = Reference.from_device(json.loads(helpers.netsum_config(k)), sw.device)
    rng = random.Random(200 + k)
    hosts = [helpers.worker_host(i) for i in range(5)]
    cur = [0] * 4
    results = 0
    for n in range(250):
        for h, frame in _stream(helpers, rng, k, hosts, cur):
            got = sw.device.process(h.port, frame)
            assert got == ref.process(h.port, frame), n
            results += len(got)
    assert results > 100
    regs = {n: [int(x) for x in r.values] for n, r in sw.pipeline.registers.items()}
    assert regs == ref.registers
    assert sw.device.stats.internal_errors == 0


def test_router_lpm_entries_and_their_changes() -> None:
    """LPM entries of every prefix length, inserted, modified and deleted between packets:
    the C copy of the table must follow the Python table exactly."""
    j = json.loads(ROUTER_JSON.read_text())
    py, nat = _devices(j)
    assert _native(nat), nat.pipeline and nat.pipeline.native_status
    rng = random.Random(5)
    keys = []
    for _ in range(40):
        plen = rng.randrange(0, 33)
        addr = rng.getrandbits(32) & (((1 << plen) - 1) << (32 - plen))
        if (addr, plen) in keys:
            continue
        keys.append((addr, plen))
        for d in (py, nat):
            assert d.pipeline is not None
            d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
                (Lpm(addr, plen),), ActionCall("MyIngress.ipv4_forward",
                                               (0x020000000000 + plen, 1 + plen % 7))))
    base = bytes.fromhex("0200000000fe" "020000000002" "0800" "4500002e00004000" "4011")
    for n in range(300):
        if n % 50 == 49:
            addr, plen = keys.pop(rng.randrange(len(keys)))
            for d in (py, nat):
                assert d.pipeline is not None
                t = d.pipeline.tables["MyIngress.ipv4_lpm"]
                if n % 100 == 99:
                    t.delete((Lpm(addr, plen),))
                else:
                    t.modify(TableEntry((Lpm(addr, plen),),
                                        ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 6))))
        dst = rng.choice(keys)[0] ^ rng.getrandbits(rng.choice([0, 4, 12, 32]))
        frame = base + bytes(2) + struct.pack(">II", 0x0A010002, dst) + bytes(26)
        _same(py, nat, 1, frame, n)
    _agree(py, nat, "router")


def test_malformed_frames_never_crash_the_native_path() -> None:
    """Empty, one-byte, random, every truncation of a real netsum frame, jumbo frames up to
    the switch's maximum and 802.1Q-looking garbage: counted like the Python path does."""
    import p4helpers as helpers
    py, nat = _netsum(256, False), _netsum(256, True)
    assert nat.pipeline.native is not None
    h = helpers.worker_host(0)
    good = helpers.netsum_frame(h, job_id=3, slot=1, values=list(range(256)), exp=130)
    rng = random.Random(9)
    frames = [b"", b"\x00", bytes(13), bytes(14), good + bytes(64), good * 60]
    frames += [good[:n] for n in range(0, len(good), 7)]
    frames += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 1600)))
               for _ in range(150)]
    frames += [bytes(rng.randrange(256) for _ in range(65535))]
    for n, frame in enumerate(frames):
        _same(py.device, nat.device, h.port, frame, n)
    _agree(py.device, nat.device, "malformed")
    assert nat.device.stats.parser_errors > 50


def test_control_plane_register_writes_reach_the_native_path() -> None:
    j = random_program(1)
    j["actions"][0]["primitives"] = [
        {"op": "register_read", "parameters": [{"type": "field", "value": ["h", "c"]},
                                               {"type": "register_array", "value": "r0"},
                                               {"type": "field", "value": ["h", "a"]}]},
        {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata",
                                                                     "egress_spec"]},
                                        {"type": "hexstr", "value": "0x1"}]}]
    py, nat = _devices(j)
    assert _native(nat)
    for d in (py, nat):
        assert d.pipeline is not None
        d.pipeline.registers["r0"].write(3, 0xDEADBEEF)
    out = _same(py, nat, 1, H.pack(3, 0, 0, 0), "read back")
    assert out[0][1][3:7] == (0xDEADBEEF).to_bytes(4, "big")


def test_a_declined_program_runs_on_the_python_path(p4c_fixtures: Path) -> None:
    j = json.loads((p4c_fixtures / "l2_mcast.json").read_text())     # direct counters
    pl = Pipeline(j, native=True)
    assert pl.native is None and pl.native_status == "declined: direct counters"
    dev = Device()
    dev.install(pl)
    dev.process(1, bytes(64))
    assert dev.stats.internal_errors == 0 and dev.stats.rx_packets == 1


def test_a_failing_compiler_leaves_the_python_path(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("NETSUM_NATIVE_CACHE", str(tmp_path))
    monkeypatch.delenv("NETSUM_NATIVE", raising=False)
    monkeypatch.setenv("CC", "false")                   # exits 1 on any input
    j = random_program(2)          # (the compiler's path is part of the module's name)
    pl = Pipeline(j, native=True)
    assert pl.native is None and pl.native_status.startswith("build failed: C compiler failed")
    monkeypatch.setenv("CC", "no-such-compiler-netsum")
    assert Pipeline(random_program(2), native=None).native_status.startswith("no C compiler")
    py, _ = _devices(random_program(2))
    dev = Device(seed=3)
    dev.install(pl)
    frame = H.pack(1, 2, 3, 4)
    assert dev.process(2, frame) == py.process(2, frame)


def test_background_build_switches_over_between_packets(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """The automatic choice compiles an uncached module in the background: packets before,
    during and after the switch-over see one consistent state (the paths share it)."""
    monkeypatch.setenv("NETSUM_NATIVE_CACHE", str(tmp_path))
    monkeypatch.delenv("NETSUM_NATIVE", raising=False)
    j = random_program(4)           # an unused register of a new size: a module not built yet
    j["register_arrays"].append({"name": "unused", "id": 9, "size": random.randrange(1, 1 << 20),
                                 "bitwidth": 8})
    py = Device(seed=3)
    py.install(Pipeline(json.loads(json.dumps(j)), native=False))
    dev = Device(seed=3)
    pl = Pipeline(j, native=None)
    dev.install(pl)
    assert pl.native_status == "building"
    rng = random.Random(4)
    frames = [H.pack(_small(rng, 8), _small(rng, 16), _small(rng, 32), _small(rng, 32))
              for _ in range(120)]
    for n, frame in enumerate(frames):
        if n == 60:
            assert pl.wait_native(120) == "native"
        assert dev.process(2, frame) == py.process(2, frame), n
    assert _state(dev) == _state(py)
    assert dev.stats.as_dict() == py.stats.as_dict()
    assert list(tmp_path.glob("nsw_*"))                 # compiled into the cache
    assert Pipeline(j, native=None).native_status == "native"     # cached: at once
