"""Packet I/O between the controller and the CPU port (P4Runtime spec §16, PI `packet_io_mgr`).

PacketOut: the metadata of the `controller_packet_metadata` named "packet_out" is serialized in
P4Info field order, most significant bit first, into ceil(sum of bits / 8) bytes and prepended to
the payload; the frame then enters the pipeline on the CPU port.  Missing fields are 0.
PacketIn: a frame the pipeline sends to the CPU port loses its leading "packet_in" header bytes,
which become the PacketIn's metadata (canonical byte strings).  Without a "packet_in" header the
whole frame is the payload.
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.codec import decode_uint, encode_uint
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.schema import PacketMetadataInfo, Schema

__all__ = ["encode_packet_out", "decode_packet_in", "PACKET_OUT", "PACKET_IN"]

PACKET_OUT = "packet_out"
PACKET_IN = "packet_in"


def encode_packet_out(schema: Schema, packet: p4runtime_pb2.PacketOut) -> bytes:
    """The frame to inject on the CPU port for one PacketOut; INVALID_ARGUMENT on bad metadata."""
    fields = schema.packet_metadata.get(PACKET_OUT, ())
    by_id = {f.id: f for f in fields}
    values: dict[int, int] = {}
    for md in packet.metadata:
        info = by_id.get(md.metadata_id)
        if info is None:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            f"Invalid packet_out metadata id {md.metadata_id}")
        if md.metadata_id in values:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            f"Duplicate packet_out metadata id {md.metadata_id}")
        values[md.metadata_id] = decode_uint(md.value, info.bitwidth,
                                             f"packet_out metadata '{info.name}'")
    return _pack(fields, values) + packet.payload


def decode_packet_in(schema: Schema, frame: bytes) -> p4runtime_pb2.PacketIn:
    fields = schema.packet_metadata.get(PACKET_IN, ())
    msg = p4runtime_pb2.PacketIn()
    total = sum(f.bitwidth for f in fields)
    size = (total + 7) // 8
    if not fields or len(frame) < size:
        msg.payload = frame
        return msg
    header = int.from_bytes(frame[:size], "big") >> (size * 8 - total)
    shift = total
    for f in fields:
        shift -= f.bitwidth
        md = msg.metadata.add()
        md.metadata_id = f.id
        md.value = encode_uint((header >> shift) & ((1 << f.bitwidth) - 1))
    msg.payload = frame[size:]
    return msg


def _pack(fields: tuple[PacketMetadataInfo, ...], values: dict[int, int]) -> bytes:
    total = sum(f.bitwidth for f in fields)
    if total == 0:
        return b""
    acc = 0
    for f in fields:
        acc = (acc << f.bitwidth) | values.get(f.id, 0)
    size = (total + 7) // 8
    # Left-align: a header whose width is not a whole number of bytes is padded at its end.
    return (acc << (size * 8 - total)).to_bytes(size, "big")
