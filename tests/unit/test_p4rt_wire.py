"""The hand-written wire encoders of big reads (netsum.switch.p4rt.wire) against the protobuf
runtime's own serialization of the same entities: byte for byte, including the zero values
proto3 omits and the Index message that is present even for cell 0."""
from __future__ import annotations

import random

from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.p4rt import wire


def _reference(entities: list[pb.Entity]) -> bytes:
    return pb.ReadResponse(entities=entities).SerializeToString()


def test_counter_entities_match_protobuf() -> None:
    rng = random.Random(5)
    cells = [(0, 0, 0), (1, 1, 0), (127, 0, 1), (128, 2**40, 2**63 - 1)] + \
        [(rng.randrange(1 << 20), rng.randrange(1 << 63), rng.randrange(1 << 63))
         for _ in range(200)]
    for cid in (1, 0x12000001, 0xFFFFFFFF):
        ref = []
        for i, packets, nbytes in cells:
            e = pb.Entity()
            e.counter_entry.counter_id = cid
            e.counter_entry.index.index = i
            e.counter_entry.data.packet_count = packets
            e.counter_entry.data.byte_count = nbytes
            ref.append(e)
        assert wire.counter_entities(cid, cells) == _reference(ref)


def test_register_entities_match_protobuf() -> None:
    rng = random.Random(6)
    cells = [(0, 0), (1, 255), (2, 256), (3, 2**200 + 5)] + \
        [(rng.randrange(1 << 16), rng.randrange(1 << rng.randrange(1, 65))) for _ in range(200)]
    ref = []
    for i, v in cells:
        e = pb.Entity()
        e.register_entry.register_id = 0x13000007
        e.register_entry.index.index = i
        e.register_entry.data.bitstring = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
        ref.append(e)
    assert wire.register_entities(0x13000007, cells) == _reference(ref)


def test_varint_and_record() -> None:
    for n in (0, 1, 127, 128, 300, 2**63 - 1, 2**64 - 1):
        e = pb.Entity()
        e.counter_entry.counter_id = n & 0xFFFFFFFF
        body = e.SerializeToString()
        assert wire.record(body) == _reference([e])
    assert wire.varint(300) == b"\xac\x02"
