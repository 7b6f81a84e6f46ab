"""Device-config decoding, the P4Info self-consistency check and P4Info <-> pipeline binding,
on real p4c output."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.device import Device
from netsum.switch.p4rt.binding import bind_tables
from netsum.switch.p4rt.pipeline_config import check_p4info_consistent, decode_device_config
from netsum.switch.p4rt.schema import Schema

PROGRAMS = ["l2_mcast", "calc_state"]


def load(fixtures: Path, name: str) -> tuple[p4info_pb2.P4Info, dict[str, Any]]:
    info = text_format.Parse((fixtures / f"{name}.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    return info, json.loads((fixtures / f"{name}.json").read_text())


@pytest.mark.parametrize("name", PROGRAMS)
def test_real_p4c_output_binds_completely(p4c_fixtures: Path, name: str) -> None:
    info, doc = load(p4c_fixtures, name)
    check_p4info_consistent(info)
    bindings = bind_tables(Schema(info), Device.build_pipeline(doc))
    assert len(bindings) == len(info.tables)
    for b in bindings.values():
        assert b.table is not None and not b.key_problem and not b.action_problems, b.info.name
        assert b.fields is None            # plain keys: values pass unchanged


def _legacy_wrapper(device_data: bytes) -> bytes:
    """p4.tmp.P4DeviceConfig{reassign: true, device_data: ...} in protobuf wire format."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)
    return b"\x08\x01" + b"\x1a" + varint(len(device_data)) + device_data


def test_plain_and_legacy_wrapped_json_decode_the_same(p4c_fixtures: Path) -> None:
    raw = (p4c_fixtures / "l2_mcast.json").read_bytes()
    assert decode_device_config(raw) == decode_device_config(_legacy_wrapper(raw))


@pytest.mark.parametrize("data", [b"", b"not json", b"{broken", b"\x1a\x05ab", b"[1, 2]",
                                  b"\xff\xfe\x00"])
def test_bad_device_config_is_invalid_argument(data: bytes) -> None:
    with pytest.raises(P4RTError) as err:
        decode_device_config(data)
    assert err.value.code == Code.INVALID_ARGUMENT


def _dangling_action_ref(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.tables[0].action_refs.add(id=0x01ABCDEF)


def _duplicate_id(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.actions[1].preamble.id = info.actions[0].preamble.id


def _duplicate_param_id(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    a = next(a for a in info.actions if a.preamble.name == "L2Ingress.forward")
    a.params.add(id=1, name="port2", bitwidth=9)


def _zero_width_field(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.tables[0].match_fields[0].bitwidth = 0


def _dangling_direct_resource(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.tables[1].direct_resource_ids.append(0x13000099)


@pytest.mark.parametrize("mutate", [_dangling_action_ref, _duplicate_id, _duplicate_param_id,
                                    _zero_width_field, _dangling_direct_resource])
def test_inconsistent_p4info_is_invalid_argument(
        p4c_fixtures: Path, mutate: Callable[[p4info_pb2.P4Info, dict[str, Any]], None]) -> None:
    info, doc = load(p4c_fixtures, "l2_mcast")
    mutate(info, doc)
    with pytest.raises(P4RTError) as err:
        check_p4info_consistent(info)
    assert err.value.code == Code.INVALID_ARGUMENT and err.value.message
