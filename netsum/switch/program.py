"""The typed program model: BMv2 JSON objects loaded once, checked, into dataclasses that every
consumer (the Python packet code, the native backend, the replica patcher, the use analysis)
reads instead of the JSON's dicts.

It grows one kind of object at a time, and a kind moves only with all its consumers.  Typed so
far: the header layout (netsum.switch.layout), register/counter/meter arrays
(netsum.switch.stateful), calculations (netsum.switch.calculations), parser value sets
(netsum.switch.valuesets) and, here, checksums, actions, the parser, the deparser and the
controls (tables and conditionals).  Expressions inside objects (a checksum's condition, an
action's primitives, a parse state's operations and key, a conditional's expression) stay
JSON: each backend compiles them; so do a table's entries, which the table loader checks.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netsum.switch.layout import (MAX_FIELD_WIDTH, FieldSlot, HeaderInfo, Layout, cfg_error,
                                  loading)

__all__ = ["Checksum", "load_checksums", "Action", "load_actions", "Deparser", "load_deparser",
           "KeyElement", "TableDef", "Conditional", "Control", "load_controls", "Transition",
           "ParseState", "Parser", "load_parser"]


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
    i, d = _the_one(j, "deparsers", "deparser")
    path = f"deparsers[{i}] ('deparser')"
    with loading(f"deparsers[{i}]"):
        if d.get("primitives"):
            raise cfg_error(path, "deparser primitives are not supported")
        order = d.get("order") or []
        if not isinstance(order, list):
            raise cfg_error(f"{path}.order", "expected a list")
        headers = [layout.header(hn, f"{path}.order[{k}]") for k, hn in enumerate(order)]
    return Deparser("deparser", path, tuple(h for h in headers if not h.metadata))


@dataclass(frozen=True, slots=True)
class KeyElement:
    """One element of a table's key, as the JSON gives it (the table loader resolves it)."""
    name: str              # the key's name (P4Runtime's match field); else its target as text
    match_type: Any        # the JSON label: "exact", "lpm", "ternary", "range", "optional",
                           # "valid" (P4_14's validity match), or something refused later
    target: Any            # [header, field] (a header name for "valid")
    mask: Any              # a hexstr, or None


@dataclass(frozen=True, slots=True)
class TableDef:
    """One table of a control.  Const entries and the default entry stay JSON: the table
    loader checks them against the table it built (netsum.switch.table_loader)."""
    name: str
    id: int
    path: str                          # "pipelines[i] ('ingress').tables[k] ('name')"
    type: Any                          # "simple", "indirect", "indirect_ws" (else refused)
    action_profile: Any                # the profile's name for indirect tables
    key: tuple[KeyElement, ...]
    actions: tuple[tuple[str, int], ...]   # (name, id) in the JSON's order
    next_tables: Mapping[str, Any]     # action name, "__HIT__" or "__MISS__" -> next node
    base_default_next: Any             # the next node otherwise (None: the control ends)
    default_entry: Any
    entries: tuple[Any, ...]
    max_size: int
    with_counters: bool
    direct_meters: Any                 # the direct meter's name, or None
    support_timeout: bool

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.actions)


@dataclass(frozen=True, slots=True)
class Conditional:
    """One `if` of a control: its condition (expression JSON, each backend compiles it) and
    the nodes that follow."""
    name: str
    path: str
    expression: Any
    true_next: Any
    false_next: Any


@dataclass(frozen=True, slots=True)
class Control:
    """One entry of `pipelines` (v1model: 'ingress' and 'egress'): a graph of tables and
    conditionals entered at `init_table`.  Action profiles stay JSON (Pipeline loads them)."""
    name: str
    path: str                          # "pipelines[i] ('ingress')"
    init_table: Any
    tables: tuple[TableDef, ...]
    conditionals: tuple[Conditional, ...]
    action_profiles: tuple[Any, ...]


def load_controls(j: dict[str, Any]) -> dict[str, Control]:
    """v1model's two controls, 'ingress' and 'egress', by name; a ConfigError naming the
    object for a missing control, a table or conditional without a string name, a key
    element that is not an object, 'actions' and 'action_ids' of different lengths,
    `next_tables` that is not an object or sizes and ids that are not integers.  References
    (fields, actions, next nodes, profiles) are resolved by the Pipeline's loader."""
    raw = j.get("pipelines") or []
    if not isinstance(raw, list):
        raise cfg_error("pipelines", "expected a list")
    found = {p.get("name"): (i, p) for i, p in enumerate(raw)
             if isinstance(p, dict) and isinstance(p.get("name"), str)}
    for name in ("ingress", "egress"):
        if name not in found:
            raise cfg_error("pipelines", f"no pipeline named '{name}' (v1model needs one)")
    out = {}
    for name in ("ingress", "egress"):
        i, p = found[name]
        path = f"pipelines[{i}] ('{name}')"
        with loading(path):
            tables = tuple(_load_table(f"{path}.tables[{k}]", t)
                           for k, t in enumerate(_section(p, "tables", path)))
            conds = []
            for k, c in enumerate(_section(p, "conditionals", path)):
                cp = f"{path}.conditionals[{k}]"
                if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                    raise cfg_error(cp, "expected an object with a string 'name'")
                conds.append(Conditional(c["name"], f"{cp} ('{c['name']}')", c.get("expression"),
                                         c.get("true_next"), c.get("false_next")))
            out[name] = Control(name, path, p.get("init_table"), tables, tuple(conds),
                                tuple(_section(p, "action_profiles", path)))
    return out


def _the_one(j: dict[str, Any], section: str, name: str) -> tuple[int, dict[str, Any]]:
    """(index, object) of the entry of `section` named `name`, the one v1model runs."""
    raw = j.get(section) or []
    if not isinstance(raw, list):
        raise cfg_error(section, "expected a list")
    for i, x in enumerate(raw):
        if isinstance(x, dict) and x.get("name") == name:
            return i, x
    raise cfg_error(section, f"no {section[:-1]} named '{name}' (v1model needs one)")


def _section(p: dict[str, Any], key: str, path: str) -> list[Any]:
    v = p.get(key) or []
    if not isinstance(v, list):
        raise cfg_error(f"{path}.{key}", "expected a list")
    return v


def _load_table(tp: str, t: Any) -> TableDef:
    if not isinstance(t, dict) or not isinstance(t.get("name"), str):
        raise cfg_error(tp, "expected an object with a string 'name'")
    tp = f"{tp} ('{t['name']}')"
    with loading(tp):
        key = []
        for k, kf in enumerate(t.get("key") or []):
            if not isinstance(kf, dict):
                raise cfg_error(f"{tp}.key[{k}]", "expected an object")
            key.append(KeyElement(str(kf.get("name", kf.get("target"))), kf.get("match_type"),
                                  kf.get("target"), kf.get("mask")))
        names = t.get("actions") or []
        ids = t.get("action_ids") or []
        if len(names) != len(ids):
            raise cfg_error(tp, "'actions' and 'action_ids' differ in length")
        nt = t.get("next_tables") or {}
        if not isinstance(nt, dict):
            raise cfg_error(f"{tp}.next_tables", "expected an object")
        return TableDef(t["name"], int(t.get("id", 0)), tp, t.get("type", "simple"),
                     t.get("action_profile"), tuple(key), tuple(zip(names, ids)), dict(nt),
                     t.get("base_default_next"), t.get("default_entry"),
                     tuple(t.get("entries") or []), int(t.get("max_size", 1024)),
                     bool(t.get("with_counters")), t.get("direct_meters"),
                     bool(t.get("support_timeout")))


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of a parse state; `type` "hexstr" (the default), "parse_vset" or
    "default" (a value "default" is a default too, as older p4c wrote it)."""
    type: Any
    value: Any
    mask: Any
    next_state: str | None             # None: accept

    @property
    def is_default(self) -> bool:
        return self.type == "default" or self.value == "default"


@dataclass(frozen=True, slots=True)
class ParseState:
    """One parse state: its operations and transition key elements stay JSON (each backend
    compiles them), its transitions are checked to name states of the parser."""
    name: str
    path: str                          # "parsers[i] ('parser').parse_states[k] ('name')"
    ops: tuple[Any, ...]               # each a JSON object with "op" and "parameters"
    transition_key: tuple[Any, ...]
    transitions: tuple[Transition, ...]


@dataclass(frozen=True, slots=True)
class Parser:
    """v1model's parser (the entry of `parsers` named 'parser')."""
    name: str
    path: str
    init_state: str | None             # None: nothing is parsed
    states: tuple[ParseState, ...]


def load_parser(j: dict[str, Any]) -> Parser:
    """The parser; a ConfigError naming the object when there is none named 'parser', a state
    has no string name, an operation or a transition is not an object, a transition or
    `init_state` names no state of the parser."""
    i, p = _the_one(j, "parsers", "parser")
    path = f"parsers[{i}] ('parser')"
    with loading(f"parsers[{i}]"):
        raw_states = _section(p, "parse_states", path)
        names = set()
        for k, st in enumerate(raw_states):
            if not isinstance(st, dict) or not isinstance(st.get("name"), str):
                raise cfg_error(f"{path}.parse_states[{k}]", "bad parse state")
            names.add(st["name"])
        states = []
        for k, st in enumerate(raw_states):
            sp = f"{path}.parse_states[{k}] ('{st['name']}')"
            with loading(sp):
                ops = _section(st, "parser_ops", sp)
                for m, op in enumerate(ops):
                    if not isinstance(op, dict):
                        raise cfg_error(f"{sp}.parser_ops[{m}]", f"bad parser op {op!r}")
                trs = []
                for m, tr in enumerate(_section(st, "transitions", sp)):
                    tp = f"{sp}.transitions[{m}]"
                    if not isinstance(tr, dict):
                        raise cfg_error(tp, f"bad transition {tr!r}")
                    nxt = tr.get("next_state")
                    if nxt is not None and nxt not in names:
                        raise cfg_error(tp, f"unknown next_state {nxt!r}")
                    trs.append(Transition(tr.get("type", "hexstr"), tr.get("value"),
                                          tr.get("mask"), nxt))
                states.append(ParseState(st["name"], sp, tuple(ops),
                                         tuple(_section(st, "transition_key", sp)),
                                         tuple(trs)))
        init = p.get("init_state")
        if init is not None and init not in names:
            raise cfg_error(path, f"init_state {init!r} is not a parse state")
    return Parser("parser", path, init, tuple(states))
