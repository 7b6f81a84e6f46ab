"""The data plane keeps forwarding while the control plane works, and never sees half an update:
packets run in a thread while the controller flips an entry between two ports and swaps the
pipeline with RECONCILE_AND_COMMIT; every packet must leave on one of the two ports."""
from __future__ import annotations

import threading
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb
from scapy.layers.l2 import Ether

from switch.device import Device
from switch.p4rt import P4RuntimeServer
from switch.p4rt.rawclient import RawClient

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
    c = RawClient(f"127.0.0.1:{srv.port}", 0, election_id=1)
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
