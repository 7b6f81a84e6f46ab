"""Match-key codec of the P4Runtime layer (spec §9.1.1) on a table with every match kind:
what is accepted, what each invalid form is answered with, and that reads give back the
canonical form of what was written."""
from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.entries import Exact, Lpm, Optional, Range, Ternary
from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.schema import EXACT, LPM, OPTIONAL, RANGE, TERNARY, MatchField, TableInfo
from netsum.switch.p4rt.tables import decode_key, encode_key

TABLE = TableInfo(
    id=1, name="t", alias="t", action_ids=(), table_only_action_ids=frozenset(),
    default_only_action_ids=frozenset(), const_default_action_id=0,
    initial_default_action_id=0, is_const=False, size=16,
    direct_counter_id=0, direct_meter_id=0, needs_priority=True,
    match_fields=(MatchField(1, "e", 16, EXACT), MatchField(2, "l", 32, LPM),
                  MatchField(3, "t", 8, TERNARY), MatchField(4, "r", 9, RANGE),
                  MatchField(5, "o", 4, OPTIONAL)))
WILD = (Lpm(0, 0), Ternary(0, 0), Range(0, 511), Optional(None))


def fm(field_id: int, **kind: object) -> pb.FieldMatch:
    m = pb.FieldMatch(field_id=field_id)
    for name, value in kind.items():
        sub = getattr(m, name)
        for attr, v in value.items():  # type: ignore[attr-defined]
            setattr(sub, attr, v)
    return m


EXACT_1 = fm(1, exact={"value": b"\x01"})


@pytest.mark.parametrize("extra,key", [
    ([], (Exact(1),) + WILD),                                            # don't-cares omitted
    ([fm(2, lpm={"value": b"\x0a\x00\x00\x00", "prefix_len": 8})],
     (Exact(1), Lpm(0x0A000000, 8)) + WILD[1:]),
    ([fm(3, ternary={"value": b"\x00\x04", "mask": b"\x0c"})],
     (Exact(1), Lpm(0, 0), Ternary(4, 12), Range(0, 511), Optional(None))),
    ([fm(4, range={"low": b"\x01", "high": b"\x01\x00"})],
     (Exact(1), Lpm(0, 0), Ternary(0, 0), Range(1, 256), Optional(None))),
    ([fm(5, optional={"value": b"\x00"})], (Exact(1),) + WILD[:3] + (Optional(0),)),
])
def test_valid_keys_decode_and_round_trip(extra: list[pb.FieldMatch], key: tuple) -> None:
    got = decode_key(TABLE, [EXACT_1] + extra)
    assert got == key
    # Reads return the same fields, canonical, don't-cares still omitted.
    assert decode_key(TABLE, encode_key(TABLE, got)) == got
    assert len(encode_key(TABLE, got)) == 1 + len(extra)


@pytest.mark.parametrize("matches,code", [
    ([], Code.INVALID_ARGUMENT),                                        # exact field missing
    ([EXACT_1, EXACT_1], Code.INVALID_ARGUMENT),                        # duplicate field id
    ([EXACT_1, fm(9, exact={"value": b"\x01"})], Code.INVALID_ARGUMENT),  # unknown field id
    ([fm(1, ternary={"value": b"\x01", "mask": b"\x01"})], Code.INVALID_ARGUMENT),  # wrong kind
    ([fm(1, exact={"value": b"\x01\x00\x00"})], Code.INVALID_ARGUMENT),  # wider than 16 bits
    ([EXACT_1, fm(2, lpm={"value": b"\x00", "prefix_len": 0})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(2, lpm={"value": b"\x0a\x00\x00\x01", "prefix_len": 8})],
     Code.INVALID_ARGUMENT),                                            # bits past the prefix
    ([EXACT_1, fm(2, lpm={"value": b"\x01", "prefix_len": 33})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(3, ternary={"value": b"\x00", "mask": b"\x00"})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(3, ternary={"value": b"\x03", "mask": b"\x01"})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(4, range={"low": b"\x00", "high": b"\x01\xff"})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(4, range={"low": b"\x05", "high": b"\x04"})], Code.INVALID_ARGUMENT),
    ([EXACT_1, fm(5, optional={"value": b"\x10"})], Code.INVALID_ARGUMENT),  # > 4 bits
])
def test_invalid_keys(matches: list[pb.FieldMatch], code: Code) -> None:
    with pytest.raises(P4RTError) as err:
        decode_key(TABLE, matches)
    assert err.value.code == code
    assert "'t'" in err.value.message
