"""TableEntry Write and Read (P4Runtime spec §9.1) as pure functions on a `Context`.

Decoding validates what P4Runtime owns: ids, byte-string widths (§8.4), the match-kind rules of
§9.1.1 (don't-care fields are omitted; an LPM prefix of 0, a ternary mask of 0 or a full range
are therefore invalid; masked-off bits must be zero; exact fields are mandatory), priorities
(§9.1: > 0 exactly when a ternary/range/optional field exists), action scopes and parameters.
The data plane then checks what it owns (duplicates, capacity) and raises `netsum.switch.errors`.
Reads return canonical byte strings and omit don't-care fields, so a read entry written back is
the same entry.
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from p4.v1 import p4runtime_pb2

from netsum.switch.entries import (ActionCall, Exact, Lpm, Match, Optional, Range, TableEntry, Ternary,
                            narrow_slice, widen_slice)
from netsum.switch.entries import CounterValue, MeterConfig
from netsum.switch.errors import Code, NotFound
from netsum.switch.p4rt.codec import decode_uint, encode_uint
from netsum.switch.p4rt.context import Context, EntryKey, ReadStep
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt import profiles
from netsum.switch.p4rt.binding import FieldMap, TableBinding
from netsum.switch.p4rt.schema import EXACT, LPM, OPTIONAL, RANGE, TERNARY, MatchField, TableInfo

if TYPE_CHECKING:  # the data-plane table is only named here; the pipeline object is Any
    pass

__all__ = ["write_table_entry", "read_table_entries", "decode_key", "encode_key",
           "decode_action", "encode_action", "find_entry", "decode_meter_config",
           "encode_meter_config"]

Update = p4runtime_pb2.Update
MAX_PRIORITY = (1 << 31) - 1
#: Entries encoded per read step (netsum.switch.p4rt.service cuts replies between steps).
_ENCODE_CHUNK = 1024


_ONEOF_OF_KIND = {EXACT: "exact", LPM: "lpm", TERNARY: "ternary", RANGE: "range",
                  OPTIONAL: "optional"}


def _invalid(message: str) -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, message)


# ---------------------------------------------------------------- match keys

def decode_key(table: TableInfo, matches: "list[p4runtime_pb2.FieldMatch]",
               fields: tuple[FieldMap, ...] | None = None) -> tuple[Match, ...]:
    """The data-plane key of a request's matches, in the table's key order.  Matches bind to
    P4Info match fields by id; a P4Info with repeated match-field ids (PI accepts those) binds
    the matches carrying that id to its fields in order.  `fields` (netsum.switch.p4rt.binding) maps
    slice keys and JSON-ternary optional keys; None = values unchanged."""
    by_id: dict[int, list[p4runtime_pb2.FieldMatch]] = {}
    known = {f.id for f in table.match_fields}
    for m in matches:
        if m.field_id not in known:
            raise _invalid(f"Invalid match field id {m.field_id} for table '{table.name}'")
        by_id.setdefault(m.field_id, []).append(m)
    key = []
    for f in table.match_fields:
        given = by_id.get(f.id)
        key.append(_decode_field(f, given.pop(0) if given else None, table.name))
    if any(by_id.values()):
        dup = next(i for i, v in by_id.items() if v)
        raise _invalid(f"Duplicate match field id {dup} for table '{table.name}'")
    if fields is not None:
        return tuple(_to_dp(fm, f.bitwidth, m)
                     for fm, f, m in zip(fields, table.match_fields, key))
    return tuple(key)


def _to_dp(fm: FieldMap, p4_width: int, m: Match) -> Match:
    s = fm.shift
    if isinstance(m, Optional) and fm.optional_as_ternary:
        return Ternary(0, 0) if m.value is None else \
            Ternary(m.value << s, ((1 << p4_width) - 1) << s)
    return widen_slice(m, s, p4_width, fm.width) if fm.is_slice else m


def _from_dp(fm: FieldMap, p4_width: int, m: Match) -> Match:
    s = fm.shift
    full = (1 << p4_width) - 1
    if fm.optional_as_ternary and isinstance(m, Ternary):
        return Optional(None) if m.mask == 0 else Optional((m.value >> s) & full)
    return narrow_slice(m, s, p4_width, fm.width) if fm.is_slice else m


def _decode_field(f: MatchField, m: "p4runtime_pb2.FieldMatch | None", table: str) -> Match:
    width, what = f.bitwidth, f"table '{table}' field '{f.name}'"
    full = (1 << width) - 1
    kind = f.match_type
    if m is None:
        if kind == EXACT:
            raise _invalid(f"{what}: exact match field is missing")
        if kind == LPM:
            return Lpm(0, 0)
        if kind == TERNARY:
            return Ternary(0, 0)
        if kind == RANGE:
            return Range(0, full)
        if kind == OPTIONAL:
            return Optional(None)
        raise P4RTError(Code.UNIMPLEMENTED, f"{what}: unsupported match kind {kind}")
    given = m.WhichOneof("field_match_type")
    expected = _ONEOF_OF_KIND.get(kind)
    if given != expected:
        raise _invalid(f"{what}: expected a {expected} match, got {given}")
    if kind == EXACT:
        return Exact(decode_uint(m.exact.value, width, what))
    if kind == OPTIONAL:
        return Optional(decode_uint(m.optional.value, width, what))
    if kind == LPM:
        value = decode_uint(m.lpm.value, width, what)
        plen = m.lpm.prefix_len
        if plen <= 0 or plen > width:
            raise _invalid(f"{what}: prefix length {plen} out of 1..{width} "
                           "(omit the field for a don't-care match)")
        mask = full ^ ((1 << (width - plen)) - 1)
        if value & ~mask:
            raise _invalid(f"{what}: LPM value has bits set beyond the prefix length {plen}")
        return Lpm(value, plen)
    if kind == TERNARY:
        value = decode_uint(m.ternary.value, width, what)
        mask = decode_uint(m.ternary.mask, width, what + " mask")
        if mask == 0:
            raise _invalid(f"{what}: ternary mask is 0 (omit the field for a don't-care match)")
        if value & ~mask:
            raise _invalid(f"{what}: ternary value has bits set outside the mask")
        return Ternary(value, mask)
    low = decode_uint(m.range.low, width, what + " low")
    high = decode_uint(m.range.high, width, what + " high")
    if low > high:
        raise _invalid(f"{what}: range low {low} > high {high}")
    if low == 0 and high == full:
        raise _invalid(f"{what}: range covers every value (omit the field for a don't-care match)")
    return Range(low, high)


def encode_key(table: TableInfo, key: tuple[Match, ...],
               fields: tuple[FieldMap, ...] | None = None) -> list[p4runtime_pb2.FieldMatch]:
    """The P4Runtime matches of a data-plane key (canonical values, don't-cares omitted)."""
    out: list[p4runtime_pb2.FieldMatch] = []
    if fields is not None:
        key = tuple(_from_dp(fm, f.bitwidth, m)
                    for fm, f, m in zip(fields, table.match_fields, key))
    for f, match in zip(table.match_fields, key):
        fm = p4runtime_pb2.FieldMatch(field_id=f.id)
        full = (1 << f.bitwidth) - 1
        if isinstance(match, Exact):
            fm.exact.value = encode_uint(match.value, f.bitwidth)
        elif isinstance(match, Lpm):
            if match.prefix_len == 0:
                continue
            fm.lpm.value = encode_uint(match.value, f.bitwidth)
            fm.lpm.prefix_len = match.prefix_len
        elif isinstance(match, Ternary):
            if match.mask == 0:
                continue
            fm.ternary.value = encode_uint(match.value, f.bitwidth)
            fm.ternary.mask = encode_uint(match.mask, f.bitwidth)
        elif isinstance(match, Range):
            if match.low == 0 and match.high == full:
                continue
            fm.range.low = encode_uint(match.low, f.bitwidth)
            fm.range.high = encode_uint(match.high, f.bitwidth)
        elif isinstance(match, Optional):
            if match.value is None:
                continue
            fm.optional.value = encode_uint(match.value, f.bitwidth)
        out.append(fm)
    return out


# ---------------------------------------------------------------- actions

def decode_action(ctx: Context, table: TableInfo, ta: p4runtime_pb2.TableAction,
                  for_default: bool) -> ActionCall:
    kind = ta.WhichOneof("type")
    if kind is None:
        raise _invalid(f"table '{table.name}': entry has no action")
    if kind != "action":
        raise _invalid(f"table '{table.name}' has no action profile: an entry names an action "
                       f"(got {kind})")
    action = ctx.schema.action(ta.action.action_id)
    if action.id not in table.action_ids:
        raise _invalid(f"action '{action.name}' is not an action of table '{table.name}'")
    # PI answers scope violations with PERMISSION_DENIED (device_mgr.cpp validate_action).
    if for_default and action.id in table.table_only_action_ids:
        raise P4RTError(Code.PERMISSION_DENIED,
                        f"action '{action.name}' is @tableonly in table '{table.name}': it "
                        "cannot be the default action")
    if not for_default and action.id in table.default_only_action_ids:
        raise P4RTError(Code.PERMISSION_DENIED,
                        f"action '{action.name}' is @defaultonly in table '{table.name}': it "
                        "cannot be used in an entry")
    index = action.param_index()
    values: list[int | None] = [None] * len(action.params)
    for p in ta.action.params:
        i = index.get(p.param_id)
        if i is None:
            raise _invalid(f"Invalid param id {p.param_id} for action '{action.name}'")
        if values[i] is not None:
            raise _invalid(f"Duplicate param id {p.param_id} for action '{action.name}'")
        info = action.params[i]
        values[i] = decode_uint(p.value, info.bitwidth, f"action '{action.name}' param '{info.name}'")
    missing = [action.params[i].name for i, v in enumerate(values) if v is None]
    if missing:
        raise _invalid(f"action '{action.name}': missing param(s) {', '.join(missing)}")
    return ActionCall(action.name, tuple(v for v in values if v is not None))


def encode_action(ctx: Context, call: ActionCall) -> p4runtime_pb2.TableAction:
    ta = p4runtime_pb2.TableAction()
    _fill_action(ctx, ta, call)
    return ta


def _fill_action(ctx: Context, ta: p4runtime_pb2.TableAction, call: ActionCall) -> None:
    action = ctx.schema.actions.by_name.get(call.action)
    if action is None:       # a JSON action the P4Info lacks (or a table with no actions)
        raise _target_error("reading entry from",
                            f"action '{call.action}' is not in the P4Info" if call.action
                            else "the table has no actions")
    ta.action.action_id = action.id
    for info, value in zip(action.params, call.params):
        ta.action.params.add(param_id=info.id, value=encode_uint(value, info.bitwidth))


# ---------------------------------------------------------------- meters (shared with entities)

def decode_meter_config(cfg: p4runtime_pb2.MeterConfig, what: str) -> MeterConfig:
    for name in ("cir", "cburst", "pir", "pburst"):
        if getattr(cfg, name) < 0:
            raise _invalid(f"{what}: negative {name}")
    if cfg.cir > cfg.pir:
        raise _invalid(f"{what}: cir {cfg.cir} > pir {cfg.pir}")
    return MeterConfig(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)


def encode_meter_config(cfg: MeterConfig) -> p4runtime_pb2.MeterConfig:
    return p4runtime_pb2.MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)


# ---------------------------------------------------------------- write

def _priority(table: TableInfo, priority: int) -> int:
    if table.needs_priority:
        if priority <= 0 or priority > MAX_PRIORITY:
            raise _invalid(f"table '{table.name}' has ternary/range/optional fields: priority "
                           f"must be in 1..{MAX_PRIORITY}, got {priority}")
    elif priority != 0:
        raise _invalid(f"table '{table.name}' has only exact/lpm fields: priority must be 0, "
                       f"got {priority}")
    return priority


def binding(ctx: Context, table: TableInfo) -> TableBinding:
    return ctx.bindings[table.id]


def _target_error(doing: str, why: str) -> P4RTError:
    """PI's answer when bmv2 refuses an operation (PI_STATUS_TARGET_ERROR -> UNKNOWN)."""
    return P4RTError(Code.UNKNOWN, f"Error when {doing} target: {why}")


def find_entry(ctx: Context, te: p4runtime_pb2.TableEntry) -> tuple[TableInfo, TableEntry]:
    """The data-plane entry a (non-default) TableEntry message names; NOT_FOUND if none."""
    table = ctx.schema.table(te.table_id)
    b = binding(ctx, table)
    key = decode_key(table, list(te.match), b.fields)
    priority = _priority(table, te.priority)
    if b.table is None or b.key_problem:
        raise P4RTError(Code.NOT_FOUND, f"table '{table.name}': no entry with this key "
                        f"({b.key_problem})")
    # The data plane raises NotFound (-> NOT_FOUND) for a missing entry.
    return table, b.table.get(key, priority)


def _check_action(b: TableBinding, call: ActionCall, action_id: int, doing: str) -> None:
    why = b.action_problems.get(action_id)
    if why:
        raise _target_error(doing, why)


def write_table_entry(ctx: Context, kind: int, te: p4runtime_pb2.TableEntry) -> None:
    table = ctx.schema.table(te.table_id)
    b = binding(ctx, table)
    if te.is_default_action:
        _write_default(ctx, table, b, kind, te)
        return
    if table.is_const:
        raise P4RTError(Code.PERMISSION_DENIED,
                        f"table '{table.name}' is const: its entries cannot be changed")
    if te.HasField("time_since_last_hit"):
        raise _invalid("has_time_since_last_hit must not be set in WriteRequest")
    if te.idle_timeout_ns < 0:
        raise _invalid("idle_timeout_ns must be a positive value")
    if te.idle_timeout_ns and not table.supports_timeout:
        raise _invalid("idle_timeout_ns must be set to 0 for tables which do not support "
                       "idle timeout")
    key = decode_key(table, list(te.match), b.fields)
    priority = _priority(table, te.priority)
    ekey = (table.name, key, priority)
    dp_table = b.table
    if dp_table is None or b.key_problem:
        # PI keeps no entry bmv2 refused, so only INSERT reaches the target (and fails).
        if kind != Update.INSERT:
            raise P4RTError(Code.NOT_FOUND, f"table '{table.name}': cannot find match entry "
                            f"({b.key_problem})")
        if not te.HasField("action"):
            raise _invalid(f"table '{table.name}': INSERT needs an action")
        raise _target_error("adding match entry to", b.key_problem)
    indirect = profiles.profile_of_table(ctx, table.id) != 0
    if kind == Update.DELETE:
        dp_table.delete(key, priority)
        ctx.entry_metadata.pop(ekey, None)
        if indirect:
            profiles.release(ctx, table, ekey, "current")
        return
    if not te.HasField("action"):
        raise _invalid(f"table '{table.name}': {Update.Type.Name(kind)} needs an action")
    counter, meter = _direct_data(ctx, table, te)
    ref = None
    if indirect:
        if kind == Update.MODIFY:
            dp_table.get(key, priority)           # NOT_FOUND before any one-shot set is made
        call = ActionCall("")
        ref = profiles.decode_indirect(ctx, table, te.action, ekey)
    else:
        call = decode_action(ctx, table, te.action, for_default=False)
        doing = "adding match entry to" if kind == Update.INSERT else "modifying match entry in"
        _check_action(b, call, te.action.action.action_id, doing)
    try:
        if kind == Update.INSERT:
            entry = TableEntry(key, call, priority, counter=counter or CounterValue(),
                               meter=meter, ref=ref)
            dp_table.insert(entry)
            if te.idle_timeout_ns:
                dp_table.set_ttl(key, priority, te.idle_timeout_ns)
        else:
            old = dp_table.get(key, priority)
            # A MODIFY changes the action; direct resources keep their state unless given.
            # The data plane's modify keeps the counter, so a given counter_data is written
            # after it (that write cannot fail once the entry exists: the values are uint64).
            dp_table.modify(TableEntry(key, call, priority, ref=ref,
                                       meter=meter if te.HasField("meter_config") else old.meter))
            if counter is not None:
                dp_table.write_counter(key, priority, counter)
    except Exception:
        if indirect:
            profiles.release(ctx, table, ekey, "current")
        raise
    if indirect and kind == Update.MODIFY:
        profiles.release(ctx, table, ekey, "old")
        if table.supports_timeout and getattr(dp_table, "support_timeout", False):
            # PI sets the TTL on every MODIFY (0 stops the ageing).
            dp_table.set_ttl(key, priority, te.idle_timeout_ns)
    if te.metadata:
        ctx.entry_metadata[ekey] = te.metadata
    else:
        ctx.entry_metadata.pop(ekey, None)


def _direct_data(ctx: Context, table: TableInfo, te: p4runtime_pb2.TableEntry
                 ) -> tuple[CounterValue | None, MeterConfig | None]:
    counter = meter = None
    if te.HasField("counter_data"):
        if not table.direct_counter_id:
            raise _invalid(f"table '{table.name}' has no direct counter")
        counter = CounterValue(te.counter_data.packet_count, te.counter_data.byte_count)
    if te.HasField("meter_config"):
        if not table.direct_meter_id:
            raise _invalid(f"table '{table.name}' has no direct meter")
        meter = decode_meter_config(te.meter_config, f"table '{table.name}' meter_config")
    return counter, meter


def default_key(table: TableInfo) -> EntryKey:
    """Where the default entry's cookie is kept in Context.entry_metadata (PI keeps one)."""
    return (table.name, (), -1)


def _write_default(ctx: Context, table: TableInfo, b: TableBinding, kind: int,
                   te: p4runtime_pb2.TableEntry) -> None:
    if kind != Update.MODIFY:
        raise _invalid(f"table '{table.name}': the default entry can only be modified "
                       f"(got {Update.Type.Name(kind)})")
    if te.match:
        raise _invalid(f"table '{table.name}': a default entry has no match fields")
    if te.priority:
        raise _invalid(f"table '{table.name}': a default entry has no priority")
    dp_table = b.table
    if table.const_default_action_id or getattr(dp_table, "default_is_const", False):
        raise P4RTError(Code.PERMISSION_DENIED,
                        f"table '{table.name}': the default action is const")
    if dp_table is None:
        raise _target_error("modifying match entry in", b.key_problem)
    if not te.HasField("action"):
        # P4Runtime §9.1.4: a MODIFY of the default entry without an action resets it to the
        # program's default (PI: default_entry_reset), and forgets its cookie.
        dp_table.reset_default()
        ctx.entry_metadata.pop(default_key(table), None)
        return
    call = decode_action(ctx, table, te.action, for_default=True)
    _check_action(b, call, te.action.action.action_id, "modifying match entry in")
    dp_table.set_default(call)
    if te.metadata:
        ctx.entry_metadata[default_key(table)] = te.metadata
    else:
        ctx.entry_metadata.pop(default_key(table), None)


# ---------------------------------------------------------------- read

def read_table_entries(ctx: Context, te: p4runtime_pb2.TableEntry) -> Iterator[ReadStep]:
    """Entries a read filter selects (§11.1): table_id 0 = every table; an empty match = every
    entry; the default entry only when `is_default_action` is set.  One step per table: its
    entries are copied under device.lock and encoded after."""
    tables = ([ctx.schema.table(te.table_id)] if te.table_id
              else sorted(ctx.schema.tables.values(), key=lambda t: t.id))
    want_counter = te.HasField("counter_data")
    want_meter = te.HasField("meter_config")
    want_elapsed = te.HasField("time_since_last_hit")
    if want_elapsed and not te.is_default_action \
            and not all(t.supports_timeout for t in tables):
        raise _invalid("Do not set time_since_last_hit for a ReadRequest if the table does "
                       "not support idle timeout; yes, that includes wildcard reads")

    def encode_default(table: TableInfo, call: ActionCall) -> list[p4runtime_pb2.Entity]:
        e = p4runtime_pb2.Entity()
        e.table_entry.table_id = table.id
        e.table_entry.is_default_action = True
        _fill_action(ctx, e.table_entry.action, call)
        cookie = ctx.entry_metadata.get(default_key(table))
        if cookie:
            e.table_entry.metadata = cookie
        return [e]

    def encode_all(table: TableInfo, entries: list[TableEntry],
                   ageing: list[tuple[int, int]] | None) -> list[p4runtime_pb2.Entity]:
        out = []
        for i, entry in enumerate(entries):
            e = p4runtime_pb2.Entity()
            encode_entry(ctx, table, entry, want_counter, want_meter, e.table_entry)
            if ageing is not None:
                ttl, elapsed = ageing[i]
                e.table_entry.idle_timeout_ns = ttl
                if want_elapsed:
                    # PI answers 0 for an entry that does not age.
                    e.table_entry.time_since_last_hit.elapsed_ns = elapsed if ttl else 0
            out.append(e)
        return out

    for table in tables:
        b = binding(ctx, table)
        dp_table = b.table
        if te.is_default_action:
            if want_elapsed:
                raise _invalid("Default table entries do not support entry ageing, do not set "
                               "'time_since_last_hit' in your ReadRequest")
            if dp_table is None:
                raise _target_error("reading default entry from", b.key_problem)
            yield partial(encode_default, table, dp_table.default)
            continue
        if dp_table is None or b.key_problem:
            # bmv2 answers PI's fetch of an unknown table with no entries, not an error.
            entries: list[TableEntry] = []
        elif te.match:
            key = decode_key(table, list(te.match), b.fields)
            try:
                entries = [dp_table.get(key, te.priority)]
            except NotFound:
                entries = []
        else:
            entries = list(dp_table.entries())
        ageing = None
        if table.supports_timeout and getattr(dp_table, "support_timeout", False):
            assert dp_table is not None
            ageing = [(dp_table.ttl(e.key, e.priority), dp_table.elapsed_ns(e.key, e.priority))
                      for e in entries]
        # The table is copied at once (a consistent view), then encoded 1024 entries a step,
        # so the server can cut the reply into bounded ReadResponses.
        for start in range(0, max(len(entries), 1), _ENCODE_CHUNK):
            yield partial(encode_all, table, entries[start:start + _ENCODE_CHUNK],
                          None if ageing is None else ageing[start:start + _ENCODE_CHUNK])


def encode_entry(ctx: Context, table: TableInfo, entry: TableEntry, want_counter: bool,
                 want_meter: bool, out: p4runtime_pb2.TableEntry) -> None:
    """Fill `out` with the P4Runtime form of a data-plane entry (canonical values)."""
    out.table_id = table.id
    out.priority = entry.priority
    out.match.extend(encode_key(table, entry.key, binding(ctx, table).fields))
    if entry.ref is not None:
        profiles.encode_indirect(ctx, table, entry.ref, (table.name, entry.key, entry.priority),
                                 out.action)
    else:
        _fill_action(ctx, out.action, entry.action)
    if entry.is_const:
        out.is_const = True
    cookie = ctx.entry_metadata.get((table.name, entry.key, entry.priority))
    if cookie:
        out.metadata = cookie
    if want_counter and table.direct_counter_id:
        out.counter_data.packet_count = entry.counter.packets
        out.counter_data.byte_count = entry.counter.bytes
    if want_meter and table.direct_meter_id and entry.meter is not None:
        out.meter_config.CopyFrom(encode_meter_config(entry.meter))
