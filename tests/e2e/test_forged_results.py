"""issue 25 point 1, end to end: a host that is in no job (h5, on its own switch port) floods
the workers with forged RESULTs of their running job while it runs -- every (slot, round,
offset) the job's schedule uses, values 2^30, the bootstrap uses' zeros, exponent 255 -- in the
three ways the red team found that bypassed the aggregation code on v1:

* `other_port`: from UDP port 0x6E73 to UDP port 9 (not the netsum port, so v1 forwarded it
  as plain IPv4; a frame-mode worker took it, as it checked only the destination address);
* `options`: behind IPv4 options, to the worker's own port (v1 never parsed it as netsum and
  forwarded it; a kernel socket took it, and a frame-mode worker too);
* `service_src`: from the switch's own service address (what a connected socket or a frame
  check that trusts the service would take).

Rank 3 is paused (SIGSTOP) while the rogue sends, so the other ranks' first uses (the
bootstrap round of every slot) are in flight the whole time: on v1 they took the forged round-0
RESULTs (zeros, exponent 255) and summed everything after with a wrong scale.  Real
netsum-worker processes through a netsum-switch daemon set up by the controller, in both
tiers (UDP-tunnel ports with frame-mode workers; as root, network namespaces with kernel UDP
workers).  Expected, from the inputs and from what the test sent: every worker's output exact
(the rig checks it against the float64 sum of the inputs), 0 forged frames accepted, and the
switch's per-port counters of h5's port equal to the frames of each kind the rogue sent.
"""
from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import privileged_skip_reason
from netsum.rig import Mode, Rig, RigConfig
from netsum.tensors import synthetic_inputs
from netsum.wire import UDP_PORT, MsgType
from netsum.workers import wire
from rogue import NetnsRogue, is_netsum

K = 32
SLOTS = 16
ELEMENTS = 200 * K
ROGUE_IP = "10.0.0.200"
KINDS = {"other_port": "drop_unaggregated", "options": "drop_irregular",
         "service_src": "drop_spoofed_src"}


def forged(job: int, workers: int, to_mac: str, to_ip: str, service_mac: str,
           service_ip: str) -> dict[str, list[bytes]]:
    """Per kind, one forged RESULT for every use of the job's schedule (slot i: the bootstrap
    use at round 0, then blocks i, i + W, ... at rounds 1, 2, ...)."""
    nb = ELEMENTS // K
    w = min(SLOTS, nb)
    uses = [(i, 0, i * K) for i in range(w)] + \
        [(b % w, b // w + 1, b * K) for b in range(nb)]
    out: dict[str, list[bytes]] = {kind: [] for kind in KINDS}
    for slot, rnd, off in uses:
        values = bytes(4 * K) if rnd == 0 else struct.pack(f"!{K}i", *([1 << 30] * K))
        payload = wire.pack(msg_type=MsgType.RESULT, job_id=job, slot=slot, exp=255,
                          count=workers, round=rnd, offset=off, workers=workers,
                          klog2=K.bit_length() - 1, length=ELEMENTS) + values
        for kind in KINDS:
            src_ip, src_mac = (service_ip, service_mac) if kind == "service_src" else \
                (ROGUE_IP, "02:00:00:00:00:c8")
            frame = Ether(src=src_mac, dst=to_mac) / IP(
                src=src_ip, dst=to_ip, options=b"\x01\x01\x01\x01" if kind == "options" else b"")
            dport = UDP_PORT if kind == "options" else 9
            out[kind].append(bytes(frame / UDP(sport=UDP_PORT, dport=dport, chksum=0) / payload))
    return out


def _with_job(frame: bytes, job_id: int) -> bytes:
    at = 14 + (frame[14] & 0x0F) * 4 + 8 + 2          # behind IPv4 (and options) and UDP
    return frame[:at] + job_id.to_bytes(2, "big") + frame[at + 2:]


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (a launcher may run the worker as its child)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


class FastUdpRogue:
    """Frames into a UDP-tunnel switch port from its peer address, spread over `seconds` (no
    per-frame receive wait, unlike rogue.UdpRogue: thousands of frames within a job's run);
    whatever arrives meanwhile is kept."""

    def __init__(self, bind: tuple[str, int], switch_port: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(bind)
        self.sock.setblocking(False)
        self.switch_port = switch_port
        self.received: list[bytes] = []
        self.sent = 0
        self._thread: threading.Thread | None = None

    def start(self, frames: list[bytes], seconds: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(frames, seconds))
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                self.received.append(self.sock.recv(65535))
            except BlockingIOError:
                return

    def _run(self, frames: list[bytes], seconds: float) -> None:
        start = time.monotonic()
        for i, f in enumerate(frames):
            self.sock.sendto(f, self.switch_port)
            self.sent += 1
            self._drain()
            ahead = start + seconds * (i + 1) / len(frames) - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        time.sleep(0.3)
        self._drain()

    def wait(self) -> tuple[int, list[bytes]]:
        assert self._thread is not None
        self._thread.join()
        self.sock.close()
        return self.sent, self.received


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Mode.UDP, pytest.param(Mode.NETNS, marks=pytest.mark.privileged)],
                         ids=["udp", "netns"])
def test_forged_results_never_reach_a_worker(mode: Mode, tmp_path: Path) -> None:
    if mode is Mode.NETNS and privileged_skip_reason():
        pytest.skip(privileged_skip_reason() or "")
    cfg = RigConfig(tmp_path / "rig", workers=4, k=K, mode=mode, bystanders=1, slots=SLOTS,
                    timeout=30)
    with Rig(cfg) as rig:
        # The frames are built first (scapy takes seconds; the job may be over by then), for
        # job id 0, which is set once the job has its id.
        sw = rig.layout.switch(rig.host("h1").switch)
        frames: list[bytes] = []
        sent_by_kind: dict[str, int] = {}
        for rank in range(4):
            h = rig.host(f"h{rank + 1}")
            per = forged(0, 4, h.mac, h.ipv4, sw.service_mac, sw.service_ip)
            for kind, fs in per.items():
                frames += fs
                sent_by_kind[kind] = sent_by_kind.get(kind, 0) + len(fs)
        job = rig.start_job(synthetic_inputs(4, (ELEMENTS,), seed=11),
                            worker_args=["--rto", "0.2"])
        frames = [_with_job(f, job.job_id) for f in frames]
        rounds = 2
        paused = _tree(job.children[3].popen.pid)    # the worker behind its launcher
        for pid in paused:
            os.kill(pid, signal.SIGSTOP)
        # the three others' bootstrap uses reached the switch: they wait for rank 3 now
        deadline = time.monotonic() + 120
        while job.counters(job.job_id).get("data_in", 0) < 3 * SLOTS:
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        if mode is Mode.UDP:
            rogue: FastUdpRogue | NetnsRogue = FastUdpRogue(rig.peers["h5"],
                                                            ("127.0.0.1", rig.port_udp["h5"]))
        else:
            assert rig.lab is not None
            h5 = rig.host("h5")
            net = next(n for n in rig.lab.hosts if n.ipv4 == h5.ipv4)
            rogue = NetnsRogue(net.name, net.host_if, tmp_path / "rogue")
        try:
            rogue.start(frames * rounds, 3.0)
            sent, got = rogue.wait()
        finally:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)
        outcome = rig.wait_job(job)
        assert sent == len(frames) * rounds
        assert all(w.ok for w in outcome.workers), [w.error for w in outcome.workers]
        assert outcome.ok, outcome.problems
        assert not [f for f in got if is_netsum(f, MsgType.RESULT)]
        port = rig.host("h5").port
        row = next(r for r in rig.controller.port_stats()
                   if r["switch"] == rig.host("h5").switch and r["port"] == port)
        assert {KINDS[k]: row[KINDS[k]] for k in KINDS} == \
            {KINDS[k]: n * rounds for k, n in sent_by_kind.items()}
