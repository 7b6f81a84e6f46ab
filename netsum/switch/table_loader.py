"""Table construction for the loader: a loaded table (netsum.switch.program.TableDef) ->
`Table`, its key function, its default action and const entries.  Split from `netsum.switch.pipeline` to keep each module to one concern."""
from __future__ import annotations

import operator
import re
from typing import Any

from netsum.switch.entries import (ActionCall, Exact, Lpm, Match, Optional, Range, TableEntry, Ternary,
                            widen_slice)
from netsum.switch.errors import ConfigError, SwitchError
from netsum.switch.expressions import parse_hexstr
from netsum.switch.layout import cfg_error
from netsum.switch.program import TableDef
from netsum.switch.tables import ActionInfo, KeyField, Table
from netsum.match import MatchKind

__all__ = ["build_table", "key_function", "exact_key_source", "init_entries"]


def build_table(pl: Any, t: TableDef) -> Table:
    """The Table object of one loaded table (key, actions, sizes, direct resources)."""
    tp = t.path
    ttype = t.type
    profile = None
    if ttype in ("indirect", "indirect_ws"):
        profile = pl.action_profiles.get(t.action_profile)
        if profile is None:
            # bmv2's old format (the profile described in the table) is not produced by p4c
            # any more; tables name a profile of the pipeline's `action_profiles`.
            raise cfg_error(tp, f"{ttype} table names no known action profile "
                                f"({t.action_profile!r})")
        if (ttype == "indirect_ws") != profile.with_selector:
            raise cfg_error(tp, f"{ttype} table with action profile '{profile.name}' "
                                f"{'without' if ttype == 'indirect_ws' else 'with'} a selector")
    elif ttype != "simple":
        raise cfg_error(tp, f"table type {ttype!r} is not supported")
    key = []
    for k, kf in enumerate(t.key):
        kp = f"{tp}.key[{k}]"
        label = kf.match_type
        mt = MatchKind.from_label(label)
        mask = None
        sl = None
        if label == "valid":   # P4_14's match on a header's validity: its $valid$ bit, exact
            width = 1
            pl.layout.header(kf.target, kp)
            mt = MatchKind.EXACT
        elif mt is None:
            raise cfg_error(kp, f"match type {label!r} is not supported")
        else:
            width = pl.layout.slot(kf.target, kp).width
            if kf.mask is not None:
                mask = parse_hexstr(kf.mask, kp) & ((1 << width) - 1)
                sl = _slice_of(kf.name, mask)
        key.append(KeyField(kf.name, mt, width, mask, sl))
    infos: dict[str, ActionInfo] = {}
    for n, aid in t.actions:
        spec = pl._actions_by_id.get(aid)
        if spec is None or spec.name != n:
            raise cfg_error(tp, f"action id {aid} ('{n}') is not a known action")
        infos[n] = ActionInfo(n, aid, spec.runtime_data, spec.fn)
    # A table with no actions loads as in bmv2: every lookup misses and runs nothing, and
    # its (empty) default cannot be changed.
    counter = None
    if t.with_counters:
        counter = next((c.name for c in pl.counters.values()
                        if c.is_direct and c.binding == t.name), None)
        if counter is None:   # bmv2 keeps an anonymous direct counter then
            counter = f"{t.name}$counter"
    meter = None
    if t.direct_meters:
        meter = pl.meters.get(t.direct_meters)
        if meter is None:
            raise cfg_error(tp, f"unknown direct meter {t.direct_meters!r}")
    de = t.default_entry or {}
    table = Table(t.name, t.id, tuple(key), infos, t.max_size, is_const=bool(t.entries),
                  default_is_const=bool(de.get("action_const", False)) or not infos,
                  hidden=t.name.startswith("tbl_") and not key,
                  direct_counter=counter, direct_meter=meter,
                  support_timeout=t.support_timeout, profile=profile)
    if profile is not None:
        # A member must name an action every table sharing the profile offers.
        users = [u for u in pl.tables.values() if u.profile is profile] + [table]
        profile.check_call = lambda call: [u.check_call(call) for u in users] and None
    if counter in pl.counters:
        pl.counters[counter].table = table
    if meter is not None:
        meter.table = table
    return table

_SLICE_NAME = re.compile(r".*\[(\d+):(\d+)\]")


def _slice_of(name: Any, mask: int) -> tuple[int, int] | None:
    """(shift, width) of a key on a slice: p4c names the key element after its source
    expression (`hdr.h.f[15:8]`) and writes the slice as the field with mask 0xff00.  Both
    must agree; a mask written for `f & M` (whose const entries are already in place) does not
    carry a slice name."""
    m = _SLICE_NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        return None
    hi, lo = int(m.group(1)), int(m.group(2))
    if hi < lo or mask != ((1 << (hi - lo + 1)) - 1) << lo:
        return None
    return lo, hi - lo + 1


def _key_terms(pl: Any, t: TableDef) -> list[str]:
    srcs = []
    for k, kf in enumerate(t.key):
        kp = f"{t.path}.key[{k}]"
        if kf.match_type == "valid":
            srcs.append(f"F[{pl.layout.header(kf.target, kp).valid}]")
            continue
        s = pl.layout.slot(kf.target, kp)
        src = f"F[{s.index}]"
        if s.signed:
            src = f"({src} & {s.mask})"
        if kf.mask is not None:
            src = f"({src} & {parse_hexstr(kf.mask, kp)})"
        srcs.append(src)
    return srcs


def exact_key_source(pl: Any, t: TableDef, table: Table) -> str | None:
    """Source of the exact-match dict key over F (as `Table._exact_key` stores it), or None
    for other kinds of table."""
    if table.kind != "exact":
        return None
    srcs = _key_terms(pl, t)
    return srcs[0] if len(srcs) == 1 else f"({', '.join(srcs)},)"


def key_function(pl: Any, t: TableDef, table: Table) -> Any:
    """F -> what the table's lookup strategy consumes (see netsum.switch.tables)."""
    srcs = _key_terms(pl, t)
    if table.kind == "keyless":
        return None
    if table.kind == "exact":
        if all(s.startswith("F[") and s.endswith("]") for s in srcs):
            return operator.itemgetter(*(int(s[2:-1]) for s in srcs))
        body = exact_key_source(pl, t, table)
    else:
        terms, ranges = [], []
        for src, shift in zip(srcs, table._shifts):
            if shift is None:
                ranges.append(src)
            else:
                terms.append(f"({src} << {shift})" if shift else src)
        k = " | ".join(terms) or "0"
        body = k if table.kind == "lpm" else f"({k}, ({''.join(r + ', ' for r in ranges)}))"
    ns: dict[str, Any] = {}
    exec(compile(f"def key(F):\n    return {body}\n", f"<key {table.name}>", "exec"), ns)
    return ns["key"]

def _call(pl: Any, path: str, table: Table, aid: Any, data: Any) -> ActionCall:
    spec = pl._actions_by_id.get(aid)
    if spec is None or spec.name not in table.action_names:
        raise cfg_error(path, f"action id {aid!r} is not an action of table "
                              f"'{table.name}'")
    params = tuple(parse_hexstr(d, path) for d in (data or []))
    return ActionCall(spec.name, params)

def init_entries(pl: Any, t: TableDef, table: Table) -> None:
    """Initial default action and const entries (as const TableEntry objects)."""
    tp = t.path
    de = t.default_entry
    try:
        if not table.action_names:
            aid = de.get("action_id") if isinstance(de, dict) else None
            if aid is not None and not (type(aid) is int and aid < 0):   # -1: none
                raise cfg_error(f"{tp}.default_entry", "a table with no actions has no "
                                                       "default action")
        elif isinstance(de, dict) and "action_id" in de:
            table.set_initial_default(_call(pl, f"{tp}.default_entry", table,
                                                 de["action_id"], de.get("action_data")))
        else:
            table.set_initial_default(ActionCall(table.action_names[0]) if
                                      not pl.actions[table.action_names[0]].runtime_data
                                      else ActionCall(table.action_names[0], (0,) * len(
                                          pl.actions[table.action_names[0]].runtime_data)))
        entries = t.entries
        prios = [e.get("priority", k) for k, e in enumerate(entries)]
        top = max(prios, default=0) + 1
        for k, e in enumerate(entries):
            ep = f"{tp}.entries[{k}]"
            key = tuple(_const_match(f"{ep}.match_key[{m}]", kf, table.key[m])
                        for m, kf in enumerate(e.get("match_key") or []))
            ae = e.get("action_entry") or {}
            call = _call(pl, ep, table, ae.get("action_id"), ae.get("action_data"))
            # bmv2: smaller JSON priority wins; P4Runtime: larger wins.
            prio = top - prios[k] if table.needs_priority else 0
            table.insert(TableEntry(key, call, prio, is_const=True), _const_ok=True)
    except SwitchError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{tp}: {e.message}") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ConfigError(f"{tp}: malformed table entry ({e!r})") from None

def _const_match(path: str, kf: dict[str, Any], key: KeyField) -> Match:
    """A const entry's match on one key field, in the data plane's terms."""
    if key.slice is None:
        return _match(path, kf, key.match_type, key.bitwidth)
    shift, width = key.slice
    m = _match(path, kf, key.match_type, width)
    return widen_slice(m, shift, width, key.bitwidth)


def _match(path: str, kf: dict[str, Any], mt: MatchKind, width: int) -> Match:
    def hx(name: str) -> int:
        return parse_hexstr(kf.get(name), path)
    if mt is MatchKind.EXACT:
        return Exact(hx("key"))
    if mt is MatchKind.LPM:
        # bmv2 masks a const entry's key to its prefix (p4c keeps the bits the P4 source
        # wrote, e.g. `10.1.2.3/8`); P4Runtime writes with such bits stay INVALID_ARGUMENT.
        plen = int(kf["prefix_length"])
        if not 0 <= plen <= width:
            raise cfg_error(path, f"prefix length {plen} outside 0..{width}")
        full = (1 << width) - 1
        return Lpm(hx("key") & (full ^ (full >> plen)), plen)
    if mt is MatchKind.TERNARY:
        return Ternary(hx("key") & hx("mask"), hx("mask"))
    if mt is MatchKind.RANGE:
        return Range(hx("start"), hx("end"))
    if mt is MatchKind.OPTIONAL:
        # p4c writes an optional as key + mask: mask 0 is the wildcard `_`, all ones (or no
        # mask) an exact value; any other mask cannot come from an optional match.
        if kf.get("mask") is None:
            return Optional(hx("key"))
        mask = hx("mask")
        if mask == 0:
            return Optional(None)
        if mask != (1 << width) - 1:
            raise cfg_error(path, f"optional match with partial mask {kf.get('mask')!r}")
        return Optional(hx("key"))
    raise cfg_error(path, f"match type {mt.label!r} not supported in entries")
