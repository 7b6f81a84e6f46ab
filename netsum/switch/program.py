"""The typed program model: BMv2 JSON objects loaded once, checked, into dataclasses that every
consumer (the Python packet code, the native backend, the replica patcher, the use analysis)
reads instead of the JSON's dicts.

It grows one kind of object at a time, and a kind moves only with all its consumers.  Typed so
far: the header layout (netsum.switch.layout), register/counter/meter arrays
(netsum.switch.stateful), calculations (netsum.switch.calculations), parser value sets
(netsum.switch.valuesets) and, here, checksums, actions and the deparser.  Expressions inside objects (a
checksum's condition, an action's primitives) stay JSON: each backend compiles them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netsum.switch.layout import (MAX_FIELD_WIDTH, FieldSlot, HeaderInfo, Layout, cfg_error,
                                  loading)

__all__ = ["Checksum", "load_checksums", "Action", "load_actions", "Deparser", "load_deparser"]


@dataclass(frozen=True, slots=True)
class Checksum:
    """One entry of `checksums`: verified after the parser, updated before the deparser."""
    name: str
    path: str               # "checksums[i] ('name')": where errors about it point
    calculation: str        # the name of a loaded calculation
    target_ref: Any         # the target as the JSON names it ([header, field] or an alias)
    target: FieldSlot       # ... and its slot
    if_cond: Any            # the condition's expression JSON; None: always
    verify: bool
    update: bool


def load_checksums(j: dict[str, Any], layout: Layout,
                   calculations: Mapping[str, Any]) -> tuple[Checksum, ...]:
    """The program's checksums; a ConfigError naming the entry for a malformed one, an unknown
    calculation or an unknown target field."""
    raw = j.get("checksums") or []
    if not isinstance(raw, list):
        raise cfg_error("checksums", "expected a list")
    out = []
    for i, c in enumerate(raw):
        with loading(f"checksums[{i}]"):
            path = f"checksums[{i}]"
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise cfg_error(path, "expected an object with a string 'name'")
            path = f"{path} ('{c['name']}')"
            cname = c.get("calculation")
            if not isinstance(cname, str) or cname not in calculations:
                raise cfg_error(path, f"unknown calculation {cname!r}")
            target = layout.slot(c.get("target"), f"{path}.target")
            out.append(Checksum(c["name"], path, cname, c.get("target"), target,
                                c.get("if_cond"), bool(c.get("verify", True)),
                                bool(c.get("update", True))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Action:
    """One entry of `actions`: its parameters and its primitives, in the JSON's order.

    `index` is the entry's position (the native backend names its C function by it, the lane
    planner keys its runs by it); `id` is what tables and P4Runtime name it by.  Two entries
    may share a name (p4c never emits that; a hand-written JSON may): the first is the one a
    name resolves to."""
    index: int
    name: str
    id: int
    path: str                                  # "actions[i] ('name')", for errors about it
    params: tuple[tuple[str, int], ...]        # (name, bitwidth) of each runtime_data entry
    primitives: tuple[Any, ...]                # each primitive's JSON, compiled by the backends

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(w for _, w in self.params)

    @property
    def fname(self) -> str:
        """The name of the action's compiled Python function (unique: ids are)."""
        return f"A{self.id}" if self.id >= 0 else f"A_{-self.id}"


def load_actions(j: dict[str, Any]) -> tuple[Action, ...]:
    """The program's actions; a ConfigError naming the entry for a malformed one (no name,
    a parameter without a width in 1..MAX_FIELD_WIDTH, primitives that are not a list, an id
    that is not an integer or is used twice)."""
    raw = j.get("actions") or []
    if not isinstance(raw, list):
        raise cfg_error("actions", "expected a list")
    out: list[Action] = []
    ids: set[int] = set()
    for i, a in enumerate(raw):
        with loading(f"actions[{i}]"):
            path = f"actions[{i}]"
            if not isinstance(a, dict) or not isinstance(a.get("name"), str):
                raise cfg_error(path, "expected an object with a string 'name'")
            path = f"{path} ('{a['name']}')"
            params = []
            for k, p in enumerate(a.get("runtime_data") or []):
                if not (isinstance(p, dict) and type(p.get("bitwidth")) is int
                        and 0 < p["bitwidth"] <= MAX_FIELD_WIDTH):
                    raise cfg_error(f"{path}.runtime_data[{k}]", f"bad parameter {p!r}")
                params.append((str(p.get("name", f"p{k}")), p["bitwidth"]))
            aid = a.get("id", i)
            if type(aid) is not int:
                raise cfg_error(path, f"bad id {aid!r}")
            if aid in ids:
                raise cfg_error(path, f"duplicate action id {aid}")
            ids.add(aid)
            prims = a.get("primitives")
            if prims is None:
                prims = []
            if not isinstance(prims, list):
                raise cfg_error(f"{path}.primitives", "expected a list")
            out.append(Action(i, a["name"], aid, path, tuple(params), tuple(prims)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Deparser:
    """v1model's deparser (the entry of `deparsers` named 'deparser'): the headers it emits,
    in order, when valid; metadata headers in its order are left out (they are never
    emitted)."""
    name: str
    path: str                          # "deparsers[i] ('deparser')"
    headers: tuple[HeaderInfo, ...]


def load_deparser(j: dict[str, Any], layout: Layout) -> Deparser:
    """The deparser; a ConfigError when there is none named 'deparser', when it has
    primitives (p4c emits them only for other architectures' deparsers) or names an unknown
    header."""
    raw = j.get("deparsers") or []
    if not isinstance(raw, list):
        raise cfg_error("deparsers", "expected a list")
    found = next(((i, d) for i, d in enumerate(raw)
                  if isinstance(d, dict) and d.get("name") == "deparser"), None)
    if found is None:
        raise cfg_error("deparsers", "no deparser named 'deparser' (v1model needs one)")
    i, d = found
    path = f"deparsers[{i}] ('deparser')"
    with loading(f"deparsers[{i}]"):
        if d.get("primitives"):
            raise cfg_error(path, "deparser primitives are not supported")
        order = d.get("order") or []
        if not isinstance(order, list):
            raise cfg_error(f"{path}.order", "expected a list")
        headers = [layout.header(hn, f"{path}.order[{k}]") for k, hn in enumerate(order)]
    return Deparser("deparser", path, tuple(h for h in headers if not h.metadata))
