"""The data plane keeps forwarding while the control plane works, and never sees half an update:
packets run in a thread while the controller flips an entry between two ports and swaps the
pipeline with RECONCILE_AND_COMMIT; every packet must leave on one of the two ports."""
from __future__ import annotations

import threading

import pytest
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb
from scapy.layers.l2 import Ether

from helpers import p4rt_client
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

DMAC, FORWARD = 36472220, 25122418
Cfg = pb.SetForwardingPipelineConfigRequest


def forward(kind: int, port: int) -> pb.Update:
    u = pb.Update(type=kind)
    te = u.entity.table_entry
    te.table_id = DMAC
    te.match.add(field_id=1).exact.value = b"\x01"
    te.action.action.action_id = FORWARD
    te.action.action.params.add(param_id=1, value=bytes([port]))
    return u


def test_packets_see_whole_updates_during_writes_and_reconcile(p4c_fixtures: Path) -> None:
    info = text_format.Parse((p4c_fixtures / "l2_mcast.p4info.txtpb").read_text(),
                             p4info_pb2.P4Info())
    js = (p4c_fixtures / "l2_mcast.json").read_bytes()
    dev = Device(device_id=0)
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    c = p4rt_client(f"127.0.0.1:{srv.port}", 0, election_id=1)
    seen: dict[tuple[int, ...], int] = {}
    stop = threading.Event()
    frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") / (b"z" * 50))

    def traffic() -> None:
        while not stop.is_set():
            ports = tuple(sorted(p for p, _ in dev.process(1, frame)))
            seen[ports] = seen.get(ports, 0) + 1

    try:
        c.connect()
        c.set_pipeline(info, js)
        c.write([forward(pb.Update.INSERT, 3)])
        t = threading.Thread(target=traffic)
        t.start()
        try:
            for i in range(60):
                c.write([forward(pb.Update.MODIFY, 4 if i % 2 == 0 else 3)])
                if i % 10 == 0:
                    c.set_pipeline(info, js, action=Cfg.RECONCILE_AND_COMMIT)
        finally:
            stop.set()
            t.join()
    finally:
        c.close()
        srv.stop(None)
    assert set(seen) <= {(3,), (4,)}, seen
    assert sum(seen.values()) > 60 and len(seen) == 2
    assert dev.stats.internal_errors == 0


class CountingLock:
    """device.lock stand-in that records how many cells each hold covered."""

    def __init__(self, inner: threading.RLock, cells_read: list[int]) -> None:
        self.inner, self.cells_read, self.holds = inner, cells_read, []

    def __enter__(self) -> "CountingLock":
        self.inner.acquire()
        self.start = len(self.cells_read)
        return self

    def __exit__(self, *exc: object) -> None:
        self.holds.append(len(self.cells_read) - self.start)
        self.inner.release()


def test_big_reads_release_the_lock_between_chunks(p4c_fixtures: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from netsum.switch.p4rt import entities
    from netsum.switch.p4rt.service import DeviceService

    monkeypatch.setattr(entities, "READ_CHUNK_CELLS", 32)
    info = text_format.Parse((p4c_fixtures / "calc_state.p4info.txtpb").read_text(),
                             p4info_pb2.P4Info())
    dev = Device(device_id=0)
    svc = DeviceService(dev)
    svc.set_pipeline(Cfg.VERIFY_AND_COMMIT, pb.ForwardingPipelineConfig(
        p4info=info, p4_device_config=(p4c_fixtures / "calc_state.json").read_bytes()))
    reg = dev.pipeline.registers["CalcIngress.acc"]
    cells: list[int] = []
    original = type(reg).read_range
    monkeypatch.setattr(type(reg), "read_range", lambda self, a, b: cells.extend(range(a, b))
                        or original(self, a, b))
    dev.lock = lock = CountingLock(dev.lock, cells)  # type: ignore[assignment]
    got = svc.read([pb.Entity(register_entry=pb.RegisterEntry())])
    assert len(got) == 256 and sorted(cells) == list(range(256))
    assert max(lock.holds) == 32 and sum(lock.holds) == 256
