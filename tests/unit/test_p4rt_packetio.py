"""PacketOut/PacketIn metadata (de)serialization: field order, MSB first, ceil(bits/8) bytes."""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.packetio import decode_packet_in, encode_packet_out
from netsum.switch.p4rt.schema import Schema

P4INFO = """
controller_packet_metadata { preamble { id: 67146229 name: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 } }
controller_packet_metadata { preamble { id: 67121543 name: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 }
  metadata { id: 2 name: "flag" bitwidth: 1 }
  metadata { id: 3 name: "mgid" bitwidth: 16 } }
"""


@pytest.fixture
def schema() -> Schema:
    return Schema(text_format.Parse(P4INFO, p4info_pb2.P4Info()))


def packet_out(payload: bytes, **md: bytes) -> p4runtime_pb2.PacketOut:
    ids = {"egress_port": 1, "flag": 2, "mgid": 3, "bogus": 99}
    p = p4runtime_pb2.PacketOut(payload=payload)
    for name, value in md.items():
        p.metadata.add(metadata_id=ids[name], value=value)
    return p


@pytest.mark.parametrize("md,header", [
    # 9 + 1 + 16 = 26 bits -> 4 bytes, left-aligned, padded with zeros at the end.
    ({"egress_port": b"\x01\x02", "flag": b"\x01", "mgid": b"\xab\xcd"},
     ((0x102 << 17 | 1 << 16 | 0xABCD) << 6).to_bytes(4, "big")),
    ({"egress_port": b"\x03"}, ((3 << 17) << 6).to_bytes(4, "big")),   # missing fields are 0
    ({}, b"\x00\x00\x00\x00"),
    ({"mgid": b"\x00\x00\x00\x07"}, (7 << 6).to_bytes(4, "big")),       # padded value accepted
])
def test_packet_out_header(schema: Schema, md: dict[str, bytes], header: bytes) -> None:
    assert encode_packet_out(schema, packet_out(b"PAYLOAD", **md)) == header + b"PAYLOAD"


@pytest.mark.parametrize("md", [{"bogus": b"\x01"}, {"egress_port": b"\x02\x00"},
                                {"flag": b""}])
def test_bad_packet_out_metadata(schema: Schema, md: dict[str, bytes]) -> None:
    with pytest.raises(P4RTError) as err:
        encode_packet_out(schema, packet_out(b"x", **md))
    assert err.value.code == Code.INVALID_ARGUMENT


def test_duplicate_metadata_id(schema: Schema) -> None:
    p = packet_out(b"x", flag=b"\x01")
    p.metadata.add(metadata_id=2, value=b"\x00")
    with pytest.raises(P4RTError):
        encode_packet_out(schema, p)


def test_packet_in_strips_header_into_canonical_metadata(schema: Schema) -> None:
    frame = (0x1FF << 7).to_bytes(2, "big") + b"rest of frame"
    msg = decode_packet_in(schema, frame)
    assert msg.payload == b"rest of frame"
    assert [(m.metadata_id, m.value) for m in msg.metadata] == [(1, b"\x01\xff"), (2, b"\x00")]


def test_packet_in_without_header_definition_is_whole_payload() -> None:
    msg = decode_packet_in(Schema(p4info_pb2.P4Info()), b"abc")
    assert msg.payload == b"abc" and not msg.metadata


def test_packet_out_without_header_definition_is_payload_only() -> None:
    assert encode_packet_out(Schema(p4info_pb2.P4Info()), packet_out(b"abc")) == b"abc"
