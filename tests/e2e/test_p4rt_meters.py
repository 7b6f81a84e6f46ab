"""Meters over P4Runtime: indirect MeterEntry and direct (per table entry) meter configs.

Neither real p4c fixture declares a meter, so l2_mcast gets two added the way p4c writes them:
an indirect `meter(8, MeterType.packets) rate` and a direct `direct_meter(MeterType.bytes)`
bound to `dmac` (JSON `meter_arrays` + the table's `direct_meters`; P4Info `meters`,
`direct_meters` and the table's `direct_resource_ids`)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from helpers import p4rt_client
from netsum.p4rt.client import SwitchClient
from netsum.p4rt.errors import ClientError
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

DMAC, FORWARD = 36472220, 25122418
RATE, DMAC_METER = 0x14000001, 0x15000001
MODIFY, INSERT = pb.Update.MODIFY, pb.Update.INSERT

METERS_P4INFO = f"""
meters {{ preamble {{ id: {RATE} name: "L2Ingress.rate" alias: "rate" }} spec {{ unit: PACKETS }}
  size: 8 }}
direct_meters {{ preamble {{ id: {DMAC_METER} name: "L2Ingress.dmac_meter" alias: "dmac_meter" }}
  spec {{ unit: BYTES }} direct_table_id: {DMAC} }}
"""


def pipeline(fixtures: Path) -> tuple[p4info_pb2.P4Info, bytes]:
    info = text_format.Parse((fixtures / "l2_mcast.p4info.txtpb").read_text() + METERS_P4INFO,
                             p4info_pb2.P4Info())
    next(t for t in info.tables if t.preamble.id == DMAC).direct_resource_ids.append(DMAC_METER)
    doc = json.loads((fixtures / "l2_mcast.json").read_text())
    doc["meter_arrays"] = [
        {"name": "L2Ingress.rate", "id": 0, "is_direct": False, "rate_count": 2,
         "type": "packets", "size": 8},
        {"name": "L2Ingress.dmac_meter", "id": 1, "is_direct": True, "binding": "L2Ingress.dmac",
         "rate_count": 2, "type": "bytes", "size": 4096},
    ]
    next(t for t in doc["pipelines"][0]["tables"]
         if t["name"] == "L2Ingress.dmac")["direct_meters"] = "L2Ingress.dmac_meter"
    return info, json.dumps(doc).encode()


@pytest.fixture
def c(p4c_fixtures: Path) -> Iterator[SwitchClient]:
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0").start()
    client = p4rt_client(f"127.0.0.1:{srv.port}", 0, election_id=1)
    try:
        client.connect()
        client.set_pipeline(*pipeline(p4c_fixtures))
        yield client
    finally:
        client.close()
        srv.stop(None)


def cfg(cir: int, pir: int) -> pb.MeterConfig:
    return pb.MeterConfig(cir=cir, cburst=10, pir=pir, pburst=20)


def meter(index: int | None, config: pb.MeterConfig | None = None) -> pb.Entity:
    e = pb.Entity()
    e.meter_entry.meter_id = RATE
    if index is not None:
        e.meter_entry.index.index = index
    if config is not None:
        e.meter_entry.config.CopyFrom(config)
    return e


def write(c: SwitchClient, kind: int, entity: pb.Entity) -> int:
    """google.rpc code of a one-update write."""
    try:
        c.write([pb.Update(type=kind, entity=entity)])
        return 0
    except ClientError as exc:
        (err,) = exc.statuses
        return err.code


def dmac_entry(dst: bytes) -> pb.TableEntry:
    te = pb.TableEntry(table_id=DMAC)
    te.match.add(field_id=1).exact.value = dst
    te.action.action.action_id = FORWARD
    te.action.action.params.add(param_id=1, value=b"\x02")
    return te


def test_indirect_meter_write_read_reset(c: SwitchClient) -> None:
    assert write(c, MODIFY, meter(3, cfg(100, 200))) == 0
    (got,) = c.read([meter(3)])
    assert got.meter_entry.config == cfg(100, 200)
    cells = c.read([meter(None)])
    assert [e.meter_entry.index.index for e in cells] == list(range(8))
    assert [e.meter_entry.HasField("config") for e in cells].count(True) == 1
    assert write(c, MODIFY, meter(3)) == 0           # no config: back to "no meter"
    assert not c.read([meter(3)])[0].meter_entry.HasField("config")


@pytest.mark.parametrize("entity,kind,code", [
    (meter(8, cfg(1, 2)), MODIFY, 11),               # index past the array: OUT_OF_RANGE
    (meter(1, cfg(300, 200)), MODIFY, 3),            # cir > pir
    (meter(1, cfg(1, 2)), INSERT, 3),                # meters only take MODIFY
    (meter(None, cfg(1, 2)), MODIFY, 3),             # a write needs an index
])
def test_bad_meter_writes(c: SwitchClient, entity: pb.Entity, kind: int, code: int) -> None:
    assert write(c, kind, entity) == code
    assert not any(e.meter_entry.HasField("config") for e in c.read([meter(None)]))


def test_direct_meter_through_table_entry_and_direct_meter_entry(c: SwitchClient) -> None:
    te = dmac_entry(b"\x01")
    te.meter_config.CopyFrom(cfg(5, 50))
    assert write(c, INSERT, pb.Entity(table_entry=te)) == 0
    assert write(c, INSERT, pb.Entity(table_entry=dmac_entry(b"\x02"))) == 0
    dme = pb.DirectMeterEntry()
    dme.table_entry.table_id = DMAC
    dme.table_entry.match.add(field_id=1).exact.value = b"\x02"
    dme.config.CopyFrom(cfg(7, 70))
    assert write(c, MODIFY, pb.Entity(direct_meter_entry=dme)) == 0
    every = pb.DirectMeterEntry()
    every.table_entry.table_id = DMAC
    got = {e.direct_meter_entry.table_entry.match[0].exact.value: e.direct_meter_entry.config
           for e in c.read([pb.Entity(direct_meter_entry=every)])}
    assert got == {b"\x01": cfg(5, 50), b"\x02": cfg(7, 70)}
    # A MODIFY of the entry without meter_config keeps the meter.
    assert write(c, MODIFY, pb.Entity(table_entry=dmac_entry(b"\x01"))) == 0
    req = pb.TableEntry(table_id=DMAC)
    req.meter_config.SetInParent()
    configs = {e.table_entry.match[0].exact.value: e.table_entry.meter_config
               for e in c.read([pb.Entity(table_entry=req)])}
    assert configs[b"\x01"] == cfg(5, 50)
    # Direct meter of a missing entry: NOT_FOUND.
    dme.table_entry.match[0].exact.value = b"\x09"
    assert write(c, MODIFY, pb.Entity(direct_meter_entry=dme)) == 5
