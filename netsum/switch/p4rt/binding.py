"""How P4Info objects bind to the loaded pipeline: as PI + bmv2 bind them, checked lazily.

PI checks nothing of the P4Info against the BMv2 JSON at SetForwardingPipelineConfig
(`_pi_update_device_start` only hands the JSON to bmv2); objects are bound by *name* on each
operation and by *position* within a table (P4Info match field i is JSON key element i, P4Info
param i is runtime_data i).  A mismatch therefore surfaces only when a client touches the object,
and then as the error PI reports:

- a P4Info table the JSON lacks (p4c may optimise a table out of the JSON while the P4Info keeps
  it): INSERT and default MODIFY fail UNKNOWN ("Error when adding/modifying match entry in
  target"); MODIFY/DELETE of an entry fail NOT_FOUND (no entry can exist); a read of its entries
  is empty (bmv2's `mt_get_entries` answers an unknown table with nothing); a read of its default
  entry fails UNKNOWN;
- a key whose fields do not line up with the JSON's (count, match kind, or a byte width that
  differs, bmv2's BAD_MATCH_KEY): writes fail UNKNOWN;
- an action the table's JSON does not list, or with another number of parameters (bmv2's
  BAD_ACTION_DATA): writes using it fail UNKNOWN.  Actions resolve per (table, action name), as
  bmv2 does, so p4c's several same-named JSON actions (one per table) are no conflict.
- counters, meters and registers the JSON lacks: every access fails UNKNOWN.

Beyond PI: a key element on a slice (`f[h:l]`, which p4c writes as field `f` with a mask) takes
the slice's value over P4Runtime (P4Info width h-l+1) and is shifted into place; PI passes it to
bmv2 unchanged, whose byte-width check then refuses the entry.  P4Info OPTIONAL fields whose
JSON key p4c writes as `ternary` are carried as an all-ones or zero mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netsum.schema import MatchKind, P4Schema, TableInfo

__all__ = ["FieldMap", "TableBinding", "bind_tables"]

#: P4Info kind -> the data-plane kinds it can be written to (p4c writes an `optional` key
#: element as ternary in the JSON).
_DP_KIND = {MatchKind.EXACT: (MatchKind.EXACT,), MatchKind.LPM: (MatchKind.LPM,),
            MatchKind.TERNARY: (MatchKind.TERNARY,), MatchKind.RANGE: (MatchKind.RANGE,),
            MatchKind.OPTIONAL: (MatchKind.OPTIONAL, MatchKind.TERNARY)}


@dataclass(frozen=True, slots=True)
class FieldMap:
    """P4Runtime match value -> data-plane key value for one field."""
    shift: int                  # slice key: data-plane value = P4Runtime value << shift
    optional_as_ternary: bool   # P4Info OPTIONAL, JSON ternary
    width: int                  # data-plane field width
    is_slice: bool = False      # P4Info value is a slice of the field (even at shift 0)


@dataclass(frozen=True, slots=True)
class TableBinding:
    info: TableInfo
    table: Any                  # netsum.switch.tables.Table, None when the JSON lacks the table
    key_problem: str            # why no entry can be written ("" = none)
    #: None when every value passes unchanged (the common case: no per-field work).
    fields: tuple[FieldMap, ...] | None
    #: action id -> why entries with it cannot be written (absent: usable).
    action_problems: dict[int, str]


def _field_maps(info: TableInfo, table: Any) -> tuple[str, tuple[FieldMap, ...] | None]:
    key = table.key
    if len(key) != len(info.match_fields):
        return (f"P4Info has {len(info.match_fields)} match field(s), the loaded JSON key has "
                f"{len(key)}"), None
    maps, plain = [], True
    for mf, kf in zip(info.match_fields, key):
        if kf.match_type not in _DP_KIND.get(mf.match_type, ()):
            return (f"match field '{mf.name}' is {mf.match_type.label} in P4Info, "
                    f"{kf.match_type.label} in the JSON"), None
        shift = 0
        mask = kf.mask
        is_slice = mask is not None and mf.bitwidth < kf.bitwidth and \
            _is_slice(mask, mf.bitwidth)
        if is_slice:
            assert mask is not None
            shift = (mask & -mask).bit_length() - 1
        elif (mf.bitwidth + 7) // 8 != (kf.bitwidth + 7) // 8:
            return (f"match field '{mf.name}' is {mf.bitwidth} bits in P4Info, "
                    f"{kf.bitwidth} in the JSON"), None
        opt = mf.match_type == MatchKind.OPTIONAL and kf.match_type is MatchKind.TERNARY
        plain = plain and not is_slice and not opt
        maps.append(FieldMap(shift, opt, kf.bitwidth, is_slice))
    return "", (None if plain else tuple(maps))


def _is_slice(mask: int, width: int) -> bool:
    """A contiguous run of `width` one bits (what p4c writes for a key on `f[h:l]`)."""
    low = mask & -mask
    return mask > 0 and (mask + low) & mask == 0 and bin(mask).count("1") == width


def bind_tables(schema: P4Schema, pipeline: Any) -> dict[int, TableBinding]:
    """One binding per P4Info table, by name against the built pipeline."""
    out: dict[int, TableBinding] = {}
    for info in schema.tables:
        table = pipeline.tables.get(info.name)
        if table is None:
            out[info.id] = TableBinding(info, None, f"table '{info.name}' is not in the "
                                        "loaded BMv2 JSON", None, {})
            continue
        problem, fields = _field_maps(info, table)
        actions: dict[int, str] = {}
        for aid in info.action_ids:
            action = schema.actions.by_id.get(aid)
            if action is None:
                continue          # check_p4info_consistent refuses dangling refs earlier
            params = table.action_params(action.name)
            if params is None:
                actions[aid] = (f"action '{action.name}' is not an action of table "
                                f"'{info.name}' in the loaded BMv2 JSON")
            elif len(params) != len(action.params):
                actions[aid] = (f"action '{action.name}' of table '{info.name}' has "
                                f"{len(action.params)} parameter(s) in P4Info, {len(params)} "
                                "in the loaded BMv2 JSON")
        out[info.id] = TableBinding(info, table, problem, fields, actions)
    return out
