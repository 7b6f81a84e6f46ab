"""The daemon's C port loop (netsum/switch/native/io.py, ioloop.c) against the Python loop.

The same frame sequences go through a `PortSet` on loopback UDP-tunnel ports once with the C
loop and once with the Python loop (both on the native pipeline, itself proven equal to the
Python path by test_switch_native.py): every port must see the same frames in the same order,
and the statistics, register cells and packet-ins must be the same.  Sequences: netsum.p4 at
K=32 and K=256 (members, a non-member, an unknown job, stale rounds, results, cut and
corrupted frames, datagrams from foreign addresses, bursts of 100 frames into one port, a
member deleted and re-inserted and the multicast group rewritten while the loop runs) and the
router with a CPU port and a port without a socket.  What the C loop does not do itself must
leave the ports to the Python loop, with the reason in `io_status`.
"""
from __future__ import annotations

import json
import random
import struct
import subprocess
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from portloop import looped, sent_out
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.native import build
from netsum.switch.native import io as nio
from netsum.switch.pipeline import Pipeline
from netsum.switch.replication import Replica
from test_switch_native import _netsum, _stream

WHY = build.available()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
ROUTER_JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"


def _regs(dev: Device) -> dict[str, list[int]]:
    assert dev.pipeline is not None
    return {n: [int(x) for x in r.values] for n, r in dev.pipeline.registers.items()}


def _netsum_run(k: int, io: str, seed: int, shm_dir: str | None = None) -> tuple[Any, ...]:
    import p4helpers as helpers
    sw = _netsum(k, True)
    assert sw.pipeline.native is not None, sw.pipeline.native_status
    rng = random.Random(seed)
    hosts = [helpers.worker_host(i) for i in range(5)]             # the fifth is no member
    cur = [0] * 4
    member = sw.pipeline.tables["NetsumIngress.member"]
    gone = member.entries()[0]
    with looped(sw.device, [1, 2, 3, 4, 5], io, shm_dir=shm_dir) as lp:
        assert lp.ps.io_status.startswith("c:" if io == "c" else "python:"), lp.ps.io_status
        for n in range(160):
            with sw.device.lock:               # as a P4Runtime write does, while packets flow
                if n == 40:
                    member.delete(gone.key, gone.priority)
                elif n == 60:
                    member.insert(gone)
                elif n == 100:
                    sw.pipeline.pre.mc_group_modify(103, [Replica(p, p) for p in (1, 2, 3)])
            frames = [(h.port, f, rng.random() < 0.05) for h, f in _stream(helpers, rng, k,
                                                                            hosts, cur)]
            if n % 4 == 0:                     # a complete round of slots 4..7's next use
                slot = 4 + n // 4 % 4
                frames += [(h.port, helpers.netsum_frame(h, job_id=3, slot=slot, round=n // 16,
                                                         values=list(range(k)), exp=130), False)
                           for h in hosts[:4]]
            if n % 40 == 39:                   # a burst into one port: recvmmsg batches
                h = hosts[n // 40 % 4]
                frames += [(h.port, helpers.netsum_frame(
                    h, job_id=3, slot=s % 4, round=cur[s % 4] + s // 4, values=list(range(k)),
                    exp=130), False) for s in range(100)]
            lp.burst(frames)
        out = lp.finish(sent_out(sw.device))
        status = lp.ps.io_status
    return out, sw.device.stats.as_dict(), _regs(sw.device), status


@pytest.mark.slow
@pytest.mark.parametrize("k", [32, 256])
def test_netsum_p4_through_both_loops_gives_the_same_frames_and_counters(k: int) -> None:
    c = _netsum_run(k, "c", k)
    py = _netsum_run(k, "python", k)
    assert c[3] == nio.RUNNING, c[3]
    assert py[3].startswith("python: NETSUM_NATIVE_IO=0"), py[3]
    for port in py[0]:
        assert c[0][port] == py[0][port], port
    assert c[1] == py[1]
    assert c[2] == py[2]
    assert sum(len(v) for v in c[0].values()) > 100            # results really went out
    assert c[1]["udp_foreign"] > 5 and c[1]["parser_errors"] > 5 and c[1]["dropped"] > 20
    assert c[1]["internal_errors"] == 0


CPU = 64


def _router_run(io: str, shm_dir: str | None = None) -> tuple[Any, ...]:
    dev = Device(cpu_port=CPU, seed=1)
    dev.install(Pipeline(json.loads(ROUTER_JSON.read_text()), native=True))
    assert dev.pipeline is not None and dev.pipeline.native is not None
    t = dev.pipeline.tables["MyIngress.ipv4_lpm"]
    for addr, plen, port in ((0x0A000000, 8, 2), (0x0A090000, 16, CPU), (0x0A080000, 16, 9),
                             (0x0A070000, 16, 1)):
        t.insert(TableEntry((Lpm(addr, plen),), ActionCall("MyIngress.ipv4_forward",
                                                           (0x020000000000 + port, port))))
    cpu: list[bytes] = []
    dev.packet_in_handler = cpu.append
    rng = random.Random(4)
    base = bytes.fromhex("0200000000fe" "020000000002" "0800" "4500002e00004000" "4011")
    with looped(dev, [1, 2], io, shm_dir=shm_dir) as lp:
        for n in range(120):
            frames = []
            for _ in range(rng.choice([1, 1, 3, 20])):
                dst = rng.choice([0x0A010203, 0x0A090001, 0x0A080001, 0x0A070001, 0x0B000001])
                f = base + bytes(2) + struct.pack(">II", 0x0A010002, dst) + bytes(rng.choice(
                    [26, 200, 1400]))
                if rng.random() < 0.1:
                    f = f[:rng.randrange(len(f))]
                frames.append((rng.choice([1, 2]), f, rng.random() < 0.05))
            lp.burst(frames)
        out = lp.finish(sent_out(dev, cpu))
    return out, dev.stats.as_dict(), cpu


def test_router_cpu_port_and_a_port_without_socket_through_both_loops() -> None:
    c, py = _router_run("c"), _router_run("python")
    assert c[0] == py[0]
    assert c[2] == py[2] and len(c[2]) > 10                    # packet-ins, in order
    assert c[1] == py[1]
    assert c[1]["no_tx_port"] > 10 and c[1]["udp_foreign"] > 0 and c[1]["dropped"] > 0


def test_a_queue_rate_hands_the_ports_to_the_python_loop_and_back() -> None:
    dev = Device()
    dev.install(Pipeline(json.loads(ROUTER_JSON.read_text()), native=True))
    assert dev.pipeline is not None
    dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 2))))
    frame = bytes.fromhex("0200000000fe" "020000000002" "0800" "4500002e00004000" "4011") + \
        bytes(2) + struct.pack(">II", 0x0A010002, 0x0A000005) + bytes(26)
    with looped(dev, [1, 2], "c") as lp:
        lp.burst([(1, frame, False)])
        assert lp.ps.io_status == nio.RUNNING
        dev.set_queue_rate(100000, 2)
        lp.burst([(1, frame, False)] * 5)
        assert lp.ps.io_status == "python: an egress queue has a rate", lp.ps.io_status
        dev.set_queue_rate(0, 2)
        sent = 6
        deadline = time.monotonic() + 5       # once the queue is empty and RETRY has passed
        while lp.ps.io_status != nio.RUNNING:
            assert time.monotonic() < deadline, lp.ps.io_status
            lp.burst([(1, frame, False)])
            sent += 1
            time.sleep(0.01)
        out = lp.finish(sent_out(dev))
    assert len(out[2]) == sent and dev.stats.rx_packets == sent


def test_a_declined_program_stays_on_the_python_loop(p4c_fixtures: Path) -> None:
    dev = Device()
    dev.install(Pipeline(json.loads((p4c_fixtures / "l2_mcast.json").read_text()),
                         native=True))                    # direct counters: declined
    assert dev.pipeline is not None and dev.pipeline.native is None
    with looped(dev, [1], "c") as lp:
        lp.burst([(1, bytes(60), False)])
        assert lp.ps.io_status.startswith("python: the pipeline is not native (declined:"), \
            lp.ps.io_status
    assert dev.stats.rx_packets == 1


def test_pcap_logging_and_the_switch_off_choose_the_python_loop(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    from netsum.switch.ports import PortSet, parse_port_spec
    dev = Device()
    spec = parse_port_spec("1@udp:127.0.0.1:0=127.0.0.1:9")
    monkeypatch.setenv(nio.ENV, "1")
    ps = PortSet([spec], dev, pcap_dir=tmp_path)
    ps.open()
    assert ps.fast is None and "pcap" in ps.io_status and dev.io_status == ps.io_status
    ps.close()
    monkeypatch.setenv(nio.ENV, "0")
    ps = PortSet([spec], dev)
    ps.open()
    assert ps.io_status == f"python: {nio.ENV}=0"
    ps.close()


def test_the_port_loop_compiles_without_warnings(tmp_path: Path) -> None:
    """ioloop.c is hand-written: held to -Wall -Wextra (here as errors)."""
    c = tmp_path / "io.c"
    c.write_text('#define MODNAME "t"\n#define MODINIT PyInit_t\n' + nio.source())
    cc = build.compiler()
    assert cc is not None
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", f"-I{sysconfig.get_paths()['include']}", "-o",
                        str(tmp_path / "t.so"), str(c)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
