"""STF table, default and replication commands as P4Runtime updates (the client library's
entities, encoded), on a P4Info written here."""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from netsum.p4rt.entities import INSERT, update
from netsum.p4rt.errors import LiteralError, SchemaLookupError
from netsum.p4rt.schema import Schema
from netsum.tools.stf import writes
from netsum.tools.stf.syntax import (Add, CounterWrite, MeterSetRates, RegisterReset, RegisterWrite,
                               SetDefault, parse_stf)

P4INFO = """
tables {
  preamble { id: 1 name: "ingress.acl" }
  match_fields { id: 1 name: "hdr.eth.dst" bitwidth: 48 match_type: EXACT }
  match_fields { id: 2 name: "hdr.ipv4.dst" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 3 name: "hdr.extra[0].h" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 4 name: "hdr.vlan.$valid$" bitwidth: 1 match_type: EXACT }
  action_refs { id: 10 }
  action_refs { id: 11 }
}
tables {
  preamble { id: 2 name: "ingress.route" }
  match_fields { id: 1 name: "hdr.ipv4.dst" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 }
}
tables {
  preamble { id: 3 name: "egress.ranges" }
  match_fields { id: 1 name: "meta.port" bitwidth: 9 match_type: RANGE }
  match_fields { id: 2 name: "meta.tag" bitwidth: 8 match_type: OPTIONAL }
  action_refs { id: 10 }
}
tables { preamble { id: 4 name: "ingress.x" } action_refs { id: 11 } }
tables { preamble { id: 5 name: "egress.x" } action_refs { id: 11 } }
tables { preamble { id: 6 name: "egress.max" } action_refs { id: 11 } }
counters { preamble { id: 20 name: "ingress.hits" } spec { unit: BOTH } size: 4 }
meters { preamble { id: 30 name: "ingress.rate" } spec { unit: BYTES } size: 2 }
registers {
  preamble { id: 40 name: "ingress.cells" }
  type_spec { bitstring { bit { bitwidth: 16 } } }
  size: 3
}
actions { preamble { id: 10 name: "ingress.set_port" } params { id: 1 name: "port" bitwidth: 9 } }
actions { preamble { id: 11 name: "NoAction" } }
"""


@pytest.fixture(scope="module")
def schema() -> Schema:
    info = p4info_pb2.P4Info()
    text_format.Parse(P4INFO, info)
    return Schema(info)


def entry(schema: Schema, line: str) -> p4runtime_pb2.TableEntry:
    """What the runner writes for an `add`: the entry as the library encodes it."""
    cmd = parse_stf(line)[0]
    assert isinstance(cmd, Add)
    return update(INSERT, writes.table_entry(schema, cmd), schema).entity.table_entry


def matches(te: p4runtime_pb2.TableEntry) -> dict[int, p4runtime_pb2.FieldMatch]:
    return {m.field_id: m for m in te.match}


def test_ternary_masks_the_written_digits_and_exact_keys_default_to_zero(schema: Schema) -> None:
    te = entry(schema, "add acl 0 ipv4.dst:0x****0101 ingress.set_port(port:2)")
    assert te.table_id == 1 and te.priority == 1          # STF priority 0 -> P4Runtime 1
    m = matches(te)
    assert m[2].ternary.value == b"\x01\x01" and m[2].ternary.mask == b"\xff\xff"
    assert m[1].exact.value == b"\x00" and m[4].exact.value == b"\x00"
    assert 3 not in m                                      # a wildcard is left out
    assert te.action.action.action_id == 10
    assert te.action.action.params[0].value == b"\x02"


def test_key_name_forms(schema: Schema) -> None:
    te = entry(schema, "add ingress.acl 7 extra$0.h:0x25** vlan.valid:1 hdr.eth.dst:0xa "
                       "set_port(port:1)")
    m = matches(te)
    assert te.priority == 8
    assert m[3].ternary.value == b"\x25\x00" and m[3].ternary.mask == b"\xff\x00"
    assert m[4].exact.value == b"\x01"
    assert m[1].exact.value == b"\x0a"


def test_lpm_prefix_from_digits_or_slash(schema: Schema) -> None:
    m = matches(entry(schema, "add route ipv4.dst:0x0a0b**** set_port(port:1)"))
    assert (m[1].lpm.value, m[1].lpm.prefix_len) == (b"\x0a\x0b\x00\x00", 16)
    m = matches(entry(schema, "add route ipv4.dst:0x0a000001/8 set_port(port:1)"))
    # bits past the prefix are cleared, as BMv2 ignores them
    assert (m[1].lpm.value, m[1].lpm.prefix_len) == (b"\x0a\x00\x00\x00", 8)
    te = entry(schema, "add route ipv4.dst:0x0/0 set_port(port:1)")
    assert list(te.match) == [] and te.priority == 0        # no priority on an lpm table


def test_range_and_optional_take_one_value(schema: Schema) -> None:
    te = entry(schema, "add egress.ranges meta.port:5 meta.tag:7 set_port(port:1)")
    m = matches(te)
    assert (m[1].range.low, m[1].range.high) == (b"\x05", b"\x05")
    assert m[2].optional.value == b"\x07"
    assert te.priority == 1


@pytest.mark.parametrize("line,error,fragment", [
    ("add nosuch k:1 a()", SchemaLookupError, "no table named 'nosuch'"),
    ("add rout k:1 a()", SchemaLookupError, "no table named 'rout'. Did you mean 'ingress.route'?"),
    ("add route k:1 set_port(port:1)", SchemaLookupError, "no key field named 'k'"),
    ("add acl 1 dst:1 set_port(port:1)", SchemaLookupError, "key field 'dst' of table "
                                                           "'ingress.acl' is ambiguous"),
    ("add route ipv4.dst:1 drop()", SchemaLookupError, "no action named 'drop' in table "
                                                       "'ingress.route'"),
    ("add route ipv4.dst:1 set_port()", writes.StfValueError, "parameter 'port' not given"),
    ("add route ipv4.dst:1 set_port(port:512)", LiteralError, "'port': value 512 does not fit "
                                                              "in bit<9>"),
    ("add route ipv4.dst:0x1ffffffff set_port(port:1)", writes.StfValueError, "32 bits"),
    ("add route ipv4.dst:1 set_port(port:1, x:2)", writes.StfValueError, "no parameter 'x'"),
    ("add acl 1 eth.dst:0x1* set_port(port:1)", writes.StfValueError, "'*' digits"),
    ("add acl 1 ipv4.dst:0x1ffffffff set_port(port:1)", writes.StfValueError, "32 bits"),
])
def test_bad_commands(schema: Schema, line: str, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as info:
        entry(schema, line)
    assert fragment in str(info.value)


def test_ambiguous_suffix(schema: Schema) -> None:
    # A plain suffix is enough when one name has it ...
    assert entry(schema, "add ges meta.port:1 set_port(port:1)").table_id == 3
    # ... "x" ends three names, two of them after a dot: ambiguous ...
    with pytest.raises(SchemaLookupError, match="ambiguous: egress.max, egress.x, ingress.x"):
        entry(schema, "add x NoAction()")
    # ... and a dotted suffix that one name has settles it.
    assert entry(schema, "add egress.x NoAction()").table_id == 5


def test_setdefault(schema: Schema) -> None:
    cmd = parse_stf("setdefault acl NoAction()")[0]
    assert isinstance(cmd, SetDefault)
    te = update(INSERT, writes.default_entry(schema, cmd), schema).entity.table_entry
    assert te.is_default_action and te.table_id == 1 and te.action.action.action_id == 11


def _replicas(update: p4runtime_pb2.Update) -> list[tuple[int, int]]:
    pre = update.entity.packet_replication_engine_entry
    which = pre.WhichOneof("type")
    return [(r.egress_port, r.instance) for r in getattr(pre, which).replicas]


def test_replication_groups_follow_nodes_and_sessions_follow_groups() -> None:
    U = p4runtime_pb2.Update
    pre = writes.Replication()
    assert pre.create_group(5) == []                       # written once it has members
    pre.create_node(100, (2, 3))                           # handle 0
    pre.create_node(200, (4,))                             # handle 1
    first = pre.associate(5, 1)
    assert [u.type for u in first] == [U.INSERT] and _replicas(first[0]) == [(4, 200)]
    second = pre.associate(5, 0)
    assert second[0].type == U.MODIFY
    assert _replicas(second[0]) == [(4, 200), (2, 100), (3, 100)]
    sess = pre.mirror(9, "mc", 5)
    assert sess[0].type == U.INSERT and _replicas(sess[0]) == [(4, 200), (2, 100), (3, 100)]
    moved = pre.update_node(1, (6,))
    assert [u.entity.packet_replication_engine_entry.WhichOneof("type") for u in moved] == \
        ["multicast_group_entry", "clone_session_entry"]
    assert _replicas(moved[1]) == [(6, 200), (2, 100), (3, 100)]
    assert pre.mirror(9, "port", 1)[0].type == U.MODIFY
    assert pre.unmirror(9)[0].type == U.DELETE
    with pytest.raises(writes.StfValueError):
        pre.associate(6, 0)
    with pytest.raises(writes.StfValueError):
        pre.associate(5, 7)


def test_extern_writes(schema: Schema) -> None:
    cw, rw, rr, ms, ma = parse_stf("counter_write hits 3 7 700\n"
                                   "register_write cells 1 0x1234\n"
                                   "register_reset cells\n"
                                   "meter_set_rates rate 1 0.5:100 2:200\n"
                                   "meter_array_set_rates rate 1:10 3:30\n")
    assert isinstance(cw, CounterWrite) and isinstance(rw, RegisterWrite)
    assert isinstance(rr, RegisterReset) and isinstance(ms, MeterSetRates)
    assert isinstance(ma, MeterSetRates)
    c = writes.counter_write(schema, cw).entity.counter_entry
    assert (c.counter_id, c.index.index, c.data.packet_count, c.data.byte_count) == (20, 3, 7, 700)
    r = writes.register_write(schema, rw).entity.register_entry
    assert (r.register_id, r.index.index, r.data.bitstring) == (40, 1, b"\x12\x34")
    assert [u.entity.register_entry.index.index for u in writes.register_reset(schema, rr)] == \
        [0, 1, 2]
    (one,) = writes.meter_rates(schema, ms)
    cfg = one.entity.meter_entry.config
    # BMv2 rates are per microsecond, P4Runtime's per second
    assert (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) == (500000, 100, 2000000, 200)
    assert [u.entity.meter_entry.index.index for u in writes.meter_rates(schema, ma)] == [0, 1]
    (wide,) = parse_stf("register_write cells 0 0x10000")
    assert isinstance(wide, RegisterWrite)
    with pytest.raises(LiteralError, match="does not fit in bit<16>"):
        writes.register_write(schema, wide)
