"""Less common v1model behaviour on a hand-written JSON (tests/switch_json/features.json):
exit, register index past the array, resubmit/recirculate with field lists, E2E clone, crc32
hash, meters, truncate, signed arithmetic, header stacks with lookahead, parser shift."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from netsum.switch.device import Device
from netsum.switch.entries import MeterConfig, Replica
from netsum.switch.errors import InvalidArgument, OutOfRange

JSON = Path(__file__).resolve().parents[1] / "switch_json" / "features.json"
PAYLOAD = b"payload-bytes!"


@pytest.fixture
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline(JSON.read_bytes()))
    return d


def frame(mode: int, src: int = 0x0A0B0C0D0E0F, etype: int = 0x0800,
          body: bytes = PAYLOAD) -> bytes:
    return (bytes([2, 0, 0, 0, 0, mode]) + src.to_bytes(6, "big") + etype.to_bytes(2, "big")
            + body)


def with_type(f: bytes, etype: int) -> bytes:
    return f[:12] + etype.to_bytes(2, "big") + f[14:]


def test_exit_marks_the_packet_and_the_action_runs_to_its_end(dev: Device) -> None:
    # a_exit: egress_spec = 2; exit; egress_spec = 3.  bmv2's exit primitive only marks the
    # packet (ActionFnEntry::execute runs every primitive); the control stops after it.
    assert dev.process(4, frame(1)) == [(3, frame(1))]


def test_register_and_out_of_range_index(dev: Device) -> None:
    [(_, a)] = dev.process(1, frame(2, src=1))
    [(_, b)] = dev.process(1, frame(2, src=1))
    assert a[12:14] == b"\x00\x01" and b[12:14] == b"\x00\x02"
    assert dev.pipeline.registers["reg"].read(1) == 2
    # index 9 is past the 4-entry array: the read leaves the destination unchanged (0x63),
    # the write is skipped, both are counted.
    [(_, c)] = dev.process(1, frame(2, src=9))
    assert c[12:14] == b"\x00\x64"
    assert dev.stats.register_oob == 2
    assert [dev.pipeline.registers["reg"].read(i) for i in range(4)] == [0, 2, 0, 0]


def test_resubmit_keeps_field_list(dev: Device) -> None:
    assert dev.process(1, frame(3)) == [(2, frame(3))]


def test_recirculate(dev: Device) -> None:
    assert dev.process(1, frame(4)) == [(5, frame(4))]


def test_egress_clone(dev: Device) -> None:
    assert dev.process(1, frame(5)) == [(1, frame(5))]     # session 7 not configured
    dev.pipeline.pre.clone_session_insert(7, [Replica(9, 0)])
    out = dev.process(1, frame(5))
    assert sorted(out) == sorted([(9, with_type(frame(5), 2)), (1, frame(5))])


def test_crc32_hash(dev: Device) -> None:
    src = 0x112233445566
    [(_, out)] = dev.process(1, frame(6, src=src))
    assert int.from_bytes(out[6:12], "big") == zlib.crc32(src.to_bytes(6, "big"))


def test_meter_colors(dev: Device) -> None:
    m = dev.pipeline.meters["m"]
    assert [p for p, _ in dev.process(1, frame(7))] == [1]          # unconfigured: green
    m.set_config(0, MeterConfig(cir=1, cburst=1, pir=2, pburst=2))
    assert m.get_config(0) == MeterConfig(1, 1, 2, 2)
    ports = [dev.process(1, frame(7))[0][0] for _ in range(3)]
    assert ports == [1, 2, 3]                                        # green, yellow, red
    with pytest.raises(InvalidArgument):
        m.set_config(1, MeterConfig(cir=5, cburst=1, pir=2, pburst=2))
    with pytest.raises(OutOfRange):
        m.set_config(2, None)


def test_truncate(dev: Device) -> None:
    [(_, out)] = dev.process(1, frame(8))
    assert out == frame(8)[:20]


def test_signed_two_comp_mod(dev: Device) -> None:
    [(_, out)] = dev.process(1, frame(9))
    assert out[12:14] == b"\xff\xfd"                                  # (0 - 3) as int<8>


def test_header_stack_lookahead_shift_and_assign_header(dev: Device) -> None:
    f = frame(10, etype=0x9000, body=bytes([5, 6, 7, 0]) + PAYLOAD)
    [(port, out)] = dev.process(1, f)
    # tags[1] = tags[0]; tags[2] removed; the 0 terminator was consumed by `shift`
    assert port == 1 and out == f[:14] + bytes([5, 5]) + PAYLOAD


def test_stack_overflow_sets_parser_error(dev: Device) -> None:
    f = frame(0x55, etype=0x9000, body=bytes([1, 2, 3, 4, 0]) + PAYLOAD)
    [(port, out)] = dev.process(1, f)
    assert port == 0 and out == f                                     # unparsed rest kept
    assert dev.stats.parser_errors == 1 and dev.stats.truncated == 0


def test_lookahead_past_end(dev: Device) -> None:
    f = frame(0x55, etype=0x9000, body=b"")
    assert dev.process(1, f) == [(0, f)]
    assert dev.stats.truncated == 1


def test_register_control_errors(dev: Device) -> None:
    r = dev.pipeline.registers["reg"]
    with pytest.raises(OutOfRange):
        r.read(4)
    with pytest.raises(InvalidArgument):
        r.write(0, 1 << 32)


def test_select_without_default_is_no_match() -> None:
    import json
    j = json.loads(JSON.read_text())
    start = j["parsers"][0]["parse_states"][0]
    start["transitions"] = start["transitions"][:1]        # only 0x9000, no default
    d = Device()
    d.install(Device.build_pipeline(j))
    f = frame(0x55)
    assert d.process(1, f) == [(0, f)]                      # error recorded, packet goes on
    assert d.stats.parser_errors == 1 and d.stats.truncated == 0


@pytest.mark.parametrize("op, count, expect", [
    ("push", 1, [None, 5, 6]),      # push_front(1): element 0 becomes invalid
    ("pop", 1, [6, 7, None]),       # pop_front(1)
    ("pop", 3, [None, None, None]),
])
def test_stack_push_pop(op: str, count: int, expect: list[int | None]) -> None:
    import json
    j = json.loads(JSON.read_text())
    a_copy = next(a for a in j["actions"] if a["name"] == "a_copy")
    a_copy["primitives"][:2] = [{"op": op, "parameters": [
        {"type": "header_stack", "value": "tags"}, {"type": "hexstr", "value": hex(count)}]}]
    d = Device()
    d.install(Device.build_pipeline(j))
    f = frame(10, etype=0x9000, body=bytes([5, 6, 7, 0]) + PAYLOAD)
    [(_, out)] = d.process(1, f)
    tags = [v for v in expect if v is not None]
    # push_front's new element 0 is invalid, so it is not emitted
    assert out == f[:14] + bytes(tags) + PAYLOAD


def test_header_union_members_exclude_each_other() -> None:
    """tags[0] and tags[1] made into a union: extracting both leaves only the last valid."""
    import json
    j = json.loads(JSON.read_text())
    j["header_union_types"] = [{"name": "u_t", "id": 0, "headers": [["a", "tag_t"],
                                                                      ["b", "tag_t"]]}]
    j["header_unions"] = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [3, 4]}]
    d = Device()
    d.install(Device.build_pipeline(j))
    f = frame(0x55, etype=0x9000, body=bytes([5, 6, 0]) + PAYLOAD)
    [(_, out)] = d.process(1, f)
    assert out == f[:14] + bytes([6]) + PAYLOAD


def test_mark_to_drop_writes_the_header_it_is_given(p4c_fixtures: Path) -> None:
    # Real p4c output of `action ga2(inout standard_metadata_t s) { mark_to_drop(s); }`
    # applied as ga2(sm): mark_to_drop acts on the copy `s_0`, which is copied back into
    # standard_metadata; bmv2 drops the packet.
    dev = Device()
    dev.install(Device.build_pipeline(
        (p4c_fixtures / "constructs" / "global_action_sm.json").read_bytes()))
    assert dev.process(1, bytes(14)) == []
    assert dev.stats.dropped == 1
