"""Device-config decoding and the by-name P4Info <-> BMv2 JSON check, on real p4c output."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from switch.errors import Code
from switch.p4rt.errors import P4RTError
from switch.p4rt.pipeline_config import check_p4info_matches_json, decode_device_config

PROGRAMS = ["l2_mcast", "calc_state"]


def load(fixtures: Path, name: str) -> tuple[p4info_pb2.P4Info, dict[str, Any]]:
    info = text_format.Parse((fixtures / f"{name}.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    return info, json.loads((fixtures / f"{name}.json").read_text())


@pytest.mark.parametrize("name", PROGRAMS)
def test_real_p4c_output_passes(p4c_fixtures: Path, name: str) -> None:
    info, doc = load(p4c_fixtures, name)
    check_p4info_matches_json(info, doc)


def _rename_table(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    doc["pipelines"][0]["tables"][0]["name"] = "L2Ingress.dmac_renamed"


def _widen_key(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.tables[0].match_fields[0].bitwidth = 32


def _drop_key_field(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    del info.tables[1].match_fields[2]


def _param_width(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    next(a for a in info.actions if a.preamble.name == "L2Ingress.forward").params[0].bitwidth = 16


def _missing_action(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    next(a for a in info.actions if a.preamble.name == "L2Egress.set_vlan").preamble.name = "Nope"


def _direct_counter_gone(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    doc["counter_arrays"] = []


def _register_width(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    doc["register_arrays"][0]["bitwidth"] = 16


def _counter_size(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.counters[0].size = 17


@pytest.mark.parametrize("program,mutate,named", [
    ("l2_mcast", _rename_table, "L2Ingress.dmac"),
    ("l2_mcast", _widen_key, "hdr.eth.dst"),
    ("l2_mcast", _drop_key_field, "L2Ingress.acl"),
    ("l2_mcast", _param_width, "L2Ingress.forward"),
    ("l2_mcast", _missing_action, "Nope"),
    ("l2_mcast", _direct_counter_gone, "L2Ingress.dmac_hits"),
    ("calc_state", _register_width, "CalcIngress.acc"),
    ("calc_state", _counter_size, "CalcIngress.per_op"),
])
def test_mismatch_is_invalid_argument_naming_the_object(
        p4c_fixtures: Path, program: str,
        mutate: Callable[[p4info_pb2.P4Info, dict[str, Any]], None], named: str) -> None:
    info, doc = load(p4c_fixtures, program)
    doc = copy.deepcopy(doc)
    mutate(info, doc)
    with pytest.raises(P4RTError) as err:
        check_p4info_matches_json(info, doc)
    assert err.value.code == Code.INVALID_ARGUMENT
    assert named in err.value.message


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


def _fewer_actions_in_p4info(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    del info.tables[0].action_refs[0]


def _dangling_direct_resource(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    info.tables[1].direct_resource_ids.append(0x13000099)


@pytest.mark.parametrize("mutate", [_dangling_action_ref, _duplicate_id, _duplicate_param_id,
                                    _zero_width_field, _fewer_actions_in_p4info,
                                    _dangling_direct_resource])
def test_inconsistent_p4info_is_invalid_argument(
        p4c_fixtures: Path, mutate: Callable[[p4info_pb2.P4Info, dict[str, Any]], None]) -> None:
    info, doc = load(p4c_fixtures, "l2_mcast")
    mutate(info, doc)
    with pytest.raises(P4RTError) as err:
        check_p4info_matches_json(info, doc)
    assert err.value.code == Code.INVALID_ARGUMENT and err.value.message
