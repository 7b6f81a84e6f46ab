"""Malformed P4Runtime updates of every entity kind, each with the codes a PI server must answer,
for tests/p4programs/stateful.p4 (a ternary+range table with a direct counter and a direct meter,
an indirect counter, an indirect meter, two registers).

Every update is built from a valid one plus at least one *fault*; each fault alone makes PI
refuse the update with one known code (P4Runtime spec §9 and PI's device manager, as listed in
shared facts: unknown ids and bad values INVALID_ARGUMENT, an index past the array OUT_OF_RANGE,
a missing entry or group NOT_FOUND, a group id past 32767 OUT_OF_RANGE, class_of_service
UNIMPLEMENTED, INSERT/DELETE of a counter/meter/register INVALID_ARGUMENT).  With several
faults the server may report any of their codes, and nothing else; the update must change
nothing.  Entity kinds this switch does not serve (action profiles, value sets, digests, extern
entries) are UNIMPLEMENTED whatever they hold; PI answers INVALID_ARGUMENT or NOT_FOUND for
them on a program that has none, so those codes are accepted too.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

__all__ = ["Ids", "Fault", "malformed_update", "malformed_read", "KINDS", "STATS_ETYPE"]

INVALID_ARGUMENT, NOT_FOUND, OUT_OF_RANGE, UNIMPLEMENTED = 3, 5, 11, 12
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE
STATS_ETYPE = 0x88B5
#: Entry keys the tests never install (so MODIFY/DELETE of them is NOT_FOUND).
ABSENT_SRC = 0x0A0B0C0D0E0F
ABSENT_GROUPS = range(20000, 20100)


@dataclass(frozen=True, slots=True)
class Ids:
    """stateful.p4's P4Info ids, looked up by name."""
    classify: int
    mark: int
    no_action: int
    per_flow: int
    hits: int
    rate: int
    drate: int
    totals: int
    maxima: int

    @staticmethod
    def of(info: p4info_pb2.P4Info) -> "Ids":
        by_name = {o.preamble.name: o.preamble.id for kind in (
            info.tables, info.actions, info.counters, info.direct_counters, info.meters,
            info.direct_meters, info.registers) for o in kind}
        st = "StIngress."
        return Ids(by_name[st + "classify"], by_name[st + "mark"], by_name["NoAction"],
                   by_name[st + "per_flow"], by_name[st + "hits"], by_name[st + "rate"],
                   by_name[st + "drate"], by_name[st + "totals"], by_name[st + "maxima"])


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    code: int
    apply: Callable[[pb.Update], None]


def classify_entry(ids: Ids, src: int, src_mask: int, lo: int, hi: int, port: int,
                   priority: int) -> pb.TableEntry:
    """A classify entry; a ternary field with mask 0 is left out, as P4Runtime requires."""
    te = pb.TableEntry(table_id=ids.classify, priority=priority)
    if src_mask:
        m = te.match.add(field_id=1)
        m.ternary.value = src.to_bytes(6, "big")
        m.ternary.mask = src_mask.to_bytes(6, "big")
    r = te.match.add(field_id=2)
    r.range.low, r.range.high = lo.to_bytes(4, "big"), hi.to_bytes(4, "big")
    te.action.action.action_id = ids.mark
    te.action.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    return te


def _set_type(kind: int) -> Callable[[pb.Update], None]:
    def apply(u: pb.Update) -> None:
        u.type = kind
    return apply


def _edit(edit: Callable[[pb.Entity], None]) -> Callable[[pb.Update], None]:
    return lambda u: edit(u.entity)


def _table_faults(ids: Ids) -> list[Fault]:
    def te(e: pb.Entity) -> pb.TableEntry:
        return e.table_entry

    def wide_param(e: pb.Entity) -> None:
        te(e).action.action.params[0].value = (1 << 9).to_bytes(2, "big")

    def zero_mask(e: pb.Entity) -> None:
        te(e).match[0].ternary.mask = bytes(6)
        te(e).match[0].ternary.value = bytes(6)

    def low_above_high(e: pb.Entity) -> None:
        te(e).match[1].range.low, te(e).match[1].range.high = b"\x00\x00\x03\xff", b"\x00\x01"

    def default_insert(u: pb.Update) -> None:
        # INSERT whatever the type faults said: a MODIFY of the default would be valid.
        u.type = INSERT
        t = te(u.entity)
        t.ClearField("match")
        t.priority = 0
        t.is_default_action = True

    return [
        Fault("unknown table", INVALID_ARGUMENT, _edit(lambda e: setattr(te(e), "table_id",
                                                                        0x02FFFFFF))),
        Fault("unknown action", INVALID_ARGUMENT,
              _edit(lambda e: setattr(te(e).action.action, "action_id", 0x01FFFFFF))),
        Fault("parameter wider than 9 bits", INVALID_ARGUMENT, _edit(wide_param)),
        Fault("ternary table, priority 0", INVALID_ARGUMENT,
              _edit(lambda e: setattr(te(e), "priority", 0))),
        Fault("ternary mask 0", INVALID_ARGUMENT, _edit(zero_mask)),
        Fault("range low > high", INVALID_ARGUMENT, _edit(low_above_high)),
        Fault("unknown match field", INVALID_ARGUMENT,
              _edit(lambda e: setattr(te(e).match[1], "field_id", 9))),
        Fault("key value wider than 48 bits", INVALID_ARGUMENT,
              _edit(lambda e: setattr(te(e).match[0].ternary, "value", b"\x01" + bytes(6)))),
        # These two undo parts of the entry the others edit: they come last.
        Fault("missing parameter", INVALID_ARGUMENT,
              _edit(lambda e: te(e).action.action.ClearField("params"))),
        Fault("default entry inserted", INVALID_ARGUMENT, default_insert),
    ]


def _type_faults(kind_ok: int, missing_code: int | None) -> list[Fault]:
    """Faults in the update type; at most one applies to an update."""
    out = [Fault("update type unspecified", INVALID_ARGUMENT, _set_type(pb.Update.UNSPECIFIED)),
           Fault("update type 9", INVALID_ARGUMENT, _set_type(9))]
    if missing_code is None:     # counters, meters, registers: only MODIFY exists
        out += [Fault("INSERT of a fixed array cell", INVALID_ARGUMENT, _set_type(INSERT)),
                Fault("DELETE of a fixed array cell", INVALID_ARGUMENT, _set_type(DELETE))]
    else:                        # entries that do not exist: MODIFY/DELETE are NOT_FOUND
        out += [Fault("MODIFY of a missing entry", missing_code, _set_type(MODIFY)),
                Fault("DELETE of a missing entry", missing_code, _set_type(DELETE))]
    del kind_ok
    return out


def _array_faults(field: str, id_field: str, size: int) -> list[Fault]:
    def sub(e: pb.Entity) -> object:
        return getattr(e, field)

    return [
        Fault("unknown id", INVALID_ARGUMENT, _edit(lambda e: setattr(sub(e), id_field,
                                                                     0x12FFFFFF))),
        Fault("index = size", OUT_OF_RANGE,
              _edit(lambda e: setattr(sub(e).index, "index", size))),    # type: ignore[attr-defined]
        Fault("negative index", OUT_OF_RANGE,
              _edit(lambda e: setattr(sub(e).index, "index", -5))),      # type: ignore[attr-defined]
    ]


def _direct_faults(field: str) -> list[Fault]:
    def entry(e: pb.Entity) -> pb.TableEntry:
        return getattr(e, field).table_entry

    return [
        Fault("entry not in the table", NOT_FOUND,
              _edit(lambda e: setattr(entry(e).match[0].range, "high", b"\x03\xfe"))),
        Fault("unknown table", INVALID_ARGUMENT,
              _edit(lambda e: setattr(entry(e), "table_id", 0x02FFFFFF))),
    ]


def _pre_faults() -> list[Fault]:
    def g(e: pb.Entity) -> pb.MulticastGroupEntry:
        return e.packet_replication_engine_entry.multicast_group_entry

    return [
        Fault("group 0", INVALID_ARGUMENT, _edit(lambda e: setattr(g(e), "multicast_group_id", 0))),
        Fault("group 32768", OUT_OF_RANGE,
              _edit(lambda e: setattr(g(e), "multicast_group_id", 32768))),
        Fault("duplicate replica", INVALID_ARGUMENT,
              _edit(lambda e: g(e).replicas.add().CopyFrom(g(e).replicas[0]))),
    ]


def _clone_faults() -> list[Fault]:
    def c(e: pb.Entity) -> pb.CloneSessionEntry:
        return e.packet_replication_engine_entry.clone_session_entry

    return [
        Fault("session 0", INVALID_ARGUMENT, _edit(lambda e: setattr(c(e), "session_id", 0))),
        Fault("class_of_service", UNIMPLEMENTED, _edit(lambda e: setattr(c(e), "class_of_service",
                                                                         3))),
    ]


Base = Callable[[Ids, random.Random], pb.Update]


def _base_table(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=INSERT)
    # A key no test installs, on flows the traffic never uses: valid alone, harmless.
    u.entity.table_entry.CopyFrom(classify_entry(ids, ABSENT_SRC, (1 << 48) - 1, 2000, 3000,
                                                 rng.randrange(1, 8), rng.randrange(1, 100)))
    return u


def _base_counter(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=MODIFY)
    ce = u.entity.counter_entry
    ce.counter_id = ids.per_flow
    ce.index.index = rng.randrange(1024)
    ce.data.packet_count, ce.data.byte_count = 7, 700
    return u


def _base_meter(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=MODIFY)
    me = u.entity.meter_entry
    me.meter_id = ids.rate
    me.index.index = rng.randrange(1024)
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 10, 10, 20, 20
    return u


def _base_register(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=MODIFY)
    re_ = u.entity.register_entry
    re_.register_id = ids.totals
    re_.index.index = rng.randrange(1024)
    re_.data.bitstring = b"\x00\x00\x00\x2a"
    return u


def _traffic_entry(ids: Ids) -> pb.TableEntry:
    """The key of the entry the traffic hits (the test installs it)."""
    return classify_entry(ids, 0, 0, 0, 1023, 2, 10)


def _base_direct_counter(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=MODIFY)
    dc = u.entity.direct_counter_entry
    dc.table_entry.CopyFrom(_traffic_entry(ids))
    dc.table_entry.ClearField("action")
    dc.data.packet_count = 5
    return u


def _base_direct_meter(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=MODIFY)
    dm = u.entity.direct_meter_entry
    dm.table_entry.CopyFrom(_traffic_entry(ids))
    dm.table_entry.ClearField("action")
    dm.config.cir, dm.config.cburst, dm.config.pir, dm.config.pburst = 1, 1, 2, 2
    return u


def _base_group(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=INSERT)
    g = u.entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = rng.choice(ABSENT_GROUPS)
    g.replicas.add(egress_port=rng.randrange(1, 8), instance=rng.randrange(4))
    return u


def _base_clone(ids: Ids, rng: random.Random) -> pb.Update:
    u = pb.Update(type=INSERT)
    c = u.entity.packet_replication_engine_entry.clone_session_entry
    c.session_id = rng.choice(ABSENT_GROUPS)
    c.replicas.add(egress_port=rng.randrange(1, 8), instance=0)
    return u


def _unsupported(field: str) -> Base:
    def base(ids: Ids, rng: random.Random) -> pb.Update:
        u = pb.Update(type=rng.choice([INSERT, MODIFY, DELETE]))
        sub = getattr(u.entity, field)
        sub.SetInParent()
        for name in ("action_profile_id", "value_set_id", "digest_id", "extern_type_id"):
            if name in sub.DESCRIPTOR.fields_by_name:
                setattr(sub, name, rng.randrange(1 << 31))
        return u
    return base


#: kind -> (valid base update, faults of its content, missing-entry code for type faults or
#: None for fixed arrays, codes the kind may answer in any case)
KINDS: dict[str, tuple[Base, Callable[[Ids], list[Fault]], int | None]] = {
    "table_entry": (_base_table, _table_faults, NOT_FOUND),
    "counter_entry": (_base_counter, lambda ids: _array_faults("counter_entry", "counter_id",
                                                               1024), None),
    "meter_entry": (_base_meter, lambda ids: _array_faults("meter_entry", "meter_id", 1024),
                    None),
    "register_entry": (_base_register, lambda ids: _array_faults("register_entry", "register_id",
                                                                 1024), None),
    "direct_counter_entry": (_base_direct_counter,
                             lambda ids: _direct_faults("direct_counter_entry"), None),
    "direct_meter_entry": (_base_direct_meter, lambda ids: _direct_faults("direct_meter_entry"),
                           None),
    "multicast_group_entry": (_base_group, lambda ids: _pre_faults(), NOT_FOUND),
    "clone_session_entry": (_base_clone, lambda ids: _clone_faults(), NOT_FOUND),
}
UNSUPPORTED = ("action_profile_member", "action_profile_group", "value_set_entry",
               "digest_entry", "extern_entry")


def malformed_update(ids: Ids, rng: random.Random) -> tuple[pb.Update, str, set[int]]:
    """(update, kind, codes the server may answer): a valid update of a random entity kind
    with 1-3 faults, or an update of a kind this switch does not serve."""
    if rng.random() < 0.15:
        kind = rng.choice(UNSUPPORTED)
        return _unsupported(kind)(ids, rng), kind, {UNIMPLEMENTED, INVALID_ARGUMENT, NOT_FOUND}
    kind = rng.choice(sorted(KINDS))
    base, faults_of, missing = KINDS[kind]
    u = base(ids, rng)
    content = faults_of(ids)
    types = _type_faults(u.type, missing)
    # Type first, then content faults in list order (the last ones of a list may undo
    # what earlier ones edit, never the reverse).
    picked = sorted(rng.sample(range(len(content)), rng.randint(0, min(3, len(content)))))
    chosen = [content[i] for i in picked]
    if not chosen or rng.random() < 0.3:
        chosen.insert(0, rng.choice(types))
    for f in chosen:
        f.apply(u)
    return u, kind, {f.code for f in chosen}


def malformed_read(ids: Ids, rng: random.Random) -> tuple[pb.Entity, set[int]]:
    """(entity, codes) for a Read the server must refuse."""
    choice = rng.randrange(5)
    e = pb.Entity()
    if choice == 0:
        e.table_entry.table_id = 0x02FFFFFF
        return e, {INVALID_ARGUMENT, NOT_FOUND}
    if choice == 1:
        e.counter_entry.counter_id = ids.per_flow
        e.counter_entry.index.index = 1024 + rng.randrange(10)
        return e, {OUT_OF_RANGE}
    if choice == 2:
        e.meter_entry.meter_id = 0x14FFFFFF
        return e, {INVALID_ARGUMENT, NOT_FOUND}
    if choice == 3:
        e.register_entry.register_id = ids.maxima
        e.register_entry.index.index = -1 - rng.randrange(10)
        return e, {OUT_OF_RANGE, INVALID_ARGUMENT}
    e.value_set_entry.value_set_id = rng.randrange(1, 1 << 31)
    return e, {UNIMPLEMENTED, INVALID_ARGUMENT, NOT_FOUND}
