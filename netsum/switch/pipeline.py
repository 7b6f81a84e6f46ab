"""Load a BMv2 JSON program into a `Pipeline`: validated objects plus generated packet code.

The loader runs four phases, each a fixed sequence of small `init_<section>` steps in dependency
order: loading the objects (format version first; header layout before anything that names
fields; externs before the actions that use them), planning the packet path (register lanes,
timestamps, the native backend), generating code (actions before tables; tables before the nodes
that link them) and rewriting it (multicast replica patches).  Every reference error is
a `ConfigError` naming the object and its JSON path, raised here, never on a packet.  All
generated code of one pipeline shares one namespace (`Namespace`), compiled once.
"""
from __future__ import annotations

import random
from typing import Any

from netsum.switch.actions import action_source, prim_lines
from netsum.switch.calculations import build_calculation, needs_payload
from netsum.switch.errors import ConfigError
from netsum.switch.control import INLINE_DEPTH, FixedTable, InlineTable, conditional_source
from netsum.switch.expressions import ExprCompiler, parse_hexstr
from netsum.switch.lanecode import LazyFunction, fallback_source, run_source
from netsum.switch.lanes import LanePlan, plan_lanes
from netsum.switch.jsonload import strict_loads
from netsum.switch.profiles import ActionProfile
from netsum.switch.layout import MAX_FIELD_WIDTH, Layout, build_layout, cfg_error, loading
from netsum.switch.optimize import optimize_source
from netsum.switch.deparser import deparser_source
from netsum.switch.parser import parser_source
from netsum.switch.primitives import ActionLoopLimit, AssertFailure
from netsum.switch.primregistry import Namespace, PrimCtx, StdFields
from netsum.switch.program import (Action, Checksum, Control, Deparser, Parser, TableDef,
                                   load_actions, load_checksums, load_controls, load_deparser,
                                   load_parser)
from netsum.switch.reads import referenced_slots
from netsum.switch.replication import PRE
from netsum.switch.replicas import ReplicaPatcher, replica_patcher
from netsum.switch.stateful import CounterArray, MeterArray, RegisterArray
from netsum.switch.table_loader import build_table, exact_key_source, init_entries, key_function
from netsum.switch.tables import Table
from netsum.switch.valuesets import ValueSet

__all__ = ["Pipeline", "ActionSpec", "load_json"]

MAX_MINOR_VERSION = 24     # as bmv2: major 2, minor <= 24
MAX_ARRAY_SIZE = 1 << 24   # cells per register/counter/meter array (memory guard)
MAX_VALUE_SET_SIZE = 1 << 16   # members of one parser value set (memory guard)


class ActionSpec:
    __slots__ = ("name", "id", "runtime_data", "fn", "fname")

    def __init__(self, name: str, id: int, runtime_data: tuple[tuple[str, int], ...],
                 fn: Any, fname: str) -> None:
        self.name = name
        self.id = id
        self.runtime_data = runtime_data
        self.fn = fn
        self.fname = fname          # global name of the compiled function in the namespace


def load_json(config: bytes | str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(config, dict):
        return config
    try:
        j = strict_loads(config)
    except ValueError as e:
        raise ConfigError(f"device config is not valid JSON: {e}") from None
    if not isinstance(j, dict):
        raise ConfigError("device config: top level must be a JSON object")
    return j


def _list(j: dict[str, Any], key: str) -> list[Any]:
    v = j.get(key) or []
    if not isinstance(v, list):
        raise cfg_error(key, "expected a list")
    return v


def _compile(src: str, ns: Namespace, label: str) -> None:
    try:
        code = compile(src, f"<netsum {label}>", "exec")
    except SyntaxError as e:    # a loader bug, but still a clean load-time error
        raise ConfigError(f"{label}: generated code does not compile ({e.msg})") from None
    exec(code, ns.names)


class Pipeline:
    """One loaded program: the objects of the Device API plus the compiled packet code."""

    def __init__(self, j: dict[str, Any], inline_depth: int = INLINE_DEPTH,
                 fuse: bool = True, native: bool | None = False) -> None:
        self.json = j
        self.inline_depth = inline_depth     # 0 = one pipeline node per JSON node (reference)
        self.fuse = fuse                     # False = actions exactly as emitted (reference)
        self.node_names: dict[Any, str] = {}  # node function -> JSON name (trace logging)
        self.ns = Namespace()
        self.rng = random.Random()
        self.tables: dict[str, Table] = {}
        #: Action profiles / selectors by name (netsum.switch.profiles).
        self.action_profiles: dict[str, ActionProfile] = {}
        self.actions: dict[str, ActionSpec] = {}
        self.counters: dict[str, CounterArray] = {}
        self.meters: dict[str, MeterArray] = {}
        self.registers: dict[str, RegisterArray] = {}
        self.calculations: dict[str, Any] = {}
        self.value_sets: dict[str, ValueSet] = {}
        self.pre = PRE()
        self._actions_by_id: dict[int, ActionSpec] = {}
        self.parser_start: Any = None
        self.deparse: Any = None
        self.ingress_init: Any = None
        self.egress_init: Any = None
        self.verify_checksums: Any = None
        self.update_checksums: Any = None
        #: The native backend (netsum/switch/native): its runner once loaded, and why it is or
        #: is not used ("native", "building", "off", "declined: <reason>", "build failed: ...").
        self.native: Any = None
        self.native_status = "off"
        # Set by the phases below, in this order.
        self.layout: Layout
        self.std: StdFields
        self.lanes: LanePlan
        #: The packet path sets the global timestamps (a clock read per packet).
        self.uses_timestamps = False
        #: Multicast copies deparsed once and patched (netsum/switch/replicas.py); None = each
        #: copy deparsed in full.
        self.replica_patch: ReplicaPatcher | None = None
        self.checksums: tuple[Checksum, ...] = ()
        #: The program's actions as loaded (netsum.switch.program); `actions` above are their
        #: compiled functions by name.
        self.action_defs: tuple[Action, ...] = ()
        self.parser: Parser
        self.deparser: Deparser
        self.controls: dict[str, Control]
        self.load_objects()
        native_prog = self.plan_packet_path(native)
        self.generate_code()
        self.rewrite_code()
        if native_prog is not None:
            self.load_native(native_prog)

    # -- phases ----------------------------------------------------------------------------
    def load_objects(self) -> None:
        """Loading: the format version, the header layout, the standard metadata slots and
        the objects packet code refers to (register, counter and meter arrays, calculations,
        checksums, actions, the parser, the deparser, the controls), each validated."""
        self.init_meta()
        self.layout = build_layout(self.json)
        self.std = self.init_standard_metadata()
        self.init_register_arrays()
        self.init_counter_arrays()
        self.init_meter_arrays()
        self.init_calculations()
        self.checksums = load_checksums(self.json, self.layout, self.calculations)
        self.action_defs = load_actions(self.json)
        self.parser = load_parser(self.json)
        self.deparser = load_deparser(self.json, self.layout)
        self.controls = load_controls(self.json)

    def plan_packet_path(self, native: bool | None) -> Any:
        """Planning, before any code is generated against it: the register lanes, whether
        the packet path sets timestamps, and the native backend's program (None: the Python
        path alone; see `plan_native`)."""
        self.lanes = self.init_lanes()
        # Per-packet work only for what the program reads: timestamps cost a clock call.
        used = referenced_slots(self.json, self.layout, self.checksums, self.action_defs,
                                self.parser, self.controls)
        self.uses_timestamps = any(x in used for x in (self.std.ingress_global_timestamp,
                                                       self.std.egress_global_timestamp))
        return self.plan_native(native)

    def generate_code(self) -> None:
        """Code generation: the actions (fused where `fuse`), the parser with its value sets,
        the deparser, the ingress and egress controls with their tables, the checksums; all
        in the one namespace, whose fixed globals are set first."""
        self.ns.names.update(DROP_PORT=511, STATS=None, RNG=self.rng, LOG_ON=False,
                             LOG_MSG=lambda msg, args: None, AssertFailure=AssertFailure,
                             ActionLoopLimit=ActionLoopLimit)
        self.init_actions()
        self.init_value_sets()
        self.init_parsers()
        self.init_deparsers()
        self.init_pipelines()
        self.init_checksums()

    def rewrite_code(self) -> None:
        """Rewrites of the generated packet path (only when `fuse`): multicast replicas
        patched from one deparsed copy."""
        if self.fuse:
            self.replica_patch = replica_patcher(self.json, self.layout, self.checksums,
                                                 self.action_defs, self.deparser,
                                                 self.controls["egress"], self._per_copy_slots())

    # -- sections --------------------------------------------------------------------------
    def init_meta(self) -> None:
        meta = self.json.get("__meta__")
        if meta is None:
            return
        v = meta.get("version") if isinstance(meta, dict) else None
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v)):
            raise cfg_error("__meta__.version", f"bad version {v!r}")
        if v[0] != 2 or v[1] > MAX_MINOR_VERSION:
            raise cfg_error("__meta__.version", f"JSON format {v[0]}.{v[1]} is not supported "
                                                f"(need 2.x with x <= {MAX_MINOR_VERSION})")

    def init_standard_metadata(self) -> StdFields:
        lay = self.layout

        def find(name: str, alias: str | None = None) -> int | None:
            s = lay.find("standard_metadata", name)
            if s is None and alias is not None and alias in lay.aliases:
                s = lay.find(*lay.aliases[alias])
            if s is None and alias is not None:
                s = lay.find(*alias.split(".", 1))
            return s.index if s is not None else None

        required = {}
        for f in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length"):
            idx = find(f)
            if idx is None:
                raise cfg_error("headers", f"standard_metadata.{f} is required by the v1model "
                                           "switch and is missing")
            required[f] = idx
        return StdFields(
            mcast_grp=find("mcast_grp", "intrinsic_metadata.mcast_grp"),
            egress_rid=find("egress_rid", "intrinsic_metadata.egress_rid"),
            checksum_error=find("checksum_error"), parser_error=find("parser_error"),
            ingress_global_timestamp=find("ingress_global_timestamp",
                                          "intrinsic_metadata.ingress_global_timestamp"),
            egress_global_timestamp=find("egress_global_timestamp",
                                         "intrinsic_metadata.egress_global_timestamp"),
            enq_timestamp=find("enq_timestamp", "queueing_metadata.enq_timestamp"),
            enq_qdepth=find("enq_qdepth", "queueing_metadata.enq_qdepth"),
            deq_timedelta=find("deq_timedelta", "queueing_metadata.deq_timedelta"),
            deq_qdepth=find("deq_qdepth", "queueing_metadata.deq_qdepth"),
            **required)

    def _sized(self, obj: Any, path: str) -> tuple[str, int, int]:
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise cfg_error(path, "expected an object with a string 'name'")
        size = obj.get("size", 0)
        if not isinstance(size, int) or not 0 <= size <= MAX_ARRAY_SIZE:
            raise cfg_error(f"{path} ('{obj['name']}')", f"bad size {size!r}")
        return obj["name"], int(obj.get("id", 0)), size

    def init_register_arrays(self) -> None:
        for i, r in enumerate(_list(self.json, "register_arrays")):
            with loading(f"register_arrays[{i}]"):
                name, rid, size = self._sized(r, f"register_arrays[{i}]")
                w = r.get("bitwidth")
                if not isinstance(w, int) or not 0 < w <= MAX_FIELD_WIDTH:
                    raise cfg_error(f"register_arrays[{i}] ('{name}')", f"bad bitwidth {w!r}")
                self.registers[name] = RegisterArray(name, rid, size, w)

    def init_counter_arrays(self) -> None:
        for i, c in enumerate(_list(self.json, "counter_arrays")):
            with loading(f"counter_arrays[{i}]"):
                name, cid, size = self._sized(c, f"counter_arrays[{i}]")
                direct = bool(c.get("is_direct", False))
                self.counters[name] = CounterArray(name, cid, 0 if direct else size, direct,
                                                   c.get("binding"))

    def init_meter_arrays(self) -> None:
        for i, m in enumerate(_list(self.json, "meter_arrays")):
            with loading(f"meter_arrays[{i}]"):
                path = f"meter_arrays[{i}]"
                name, mid, size = self._sized(m, path)
                unit = m.get("type", "packets")
                if unit not in ("packets", "bytes"):
                    raise cfg_error(f"{path} ('{name}')", f"meter type {unit!r} is not supported")
                if m.get("rate_count", 2) != 2:
                    raise cfg_error(f"{path} ('{name}')", "only two-rate meters are supported")
                direct = bool(m.get("is_direct", False))
                ma = MeterArray(name, mid, 0 if direct else size, unit, direct, m.get("binding"))
                if direct and m.get("result_target"):
                    self.layout.slot(m["result_target"], f"{path}.result_target")
                    ma.result_target = tuple(m["result_target"])
                self.meters[name] = ma

    def init_calculations(self) -> None:
        for i, c in enumerate(_list(self.json, "calculations")):
            path = f"calculations[{i}]"
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise cfg_error(path, "expected an object with a string 'name'")
            self.calculations[c["name"]] = build_calculation(
                c, f"{path} ('{c['name']}')", self.layout, self.rng)

    def _per_copy_slots(self) -> set[int]:
        s = self.std
        return {x for x in (s.egress_port, s.egress_spec, s.egress_rid, s.instance_type,
                            s.egress_global_timestamp) if x is not None}

    def init_lanes(self) -> LanePlan:
        """Register lanes (netsum/switch/lanes.py): before the actions, which are compiled against the
        fused registers, and before the parser and deparser, which follow the vector ranges."""
        if not self.fuse:
            return LanePlan()
        try:
            return plan_lanes(self.json, self.layout, self.registers, self.action_defs)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, ConfigError):
            # Malformed JSON: the init steps that follow report it with its path.
            return LanePlan()

    def plan_native(self, native: bool | None) -> Any:
        """Before the actions are compiled: generate the program's C, or decline (then the
        reason is logged and kept in `native_status`).  Accepting moves registers and
        counters into numpy storage, which the reference code is then compiled against."""
        from netsum.switch import native as nat      # numpy-heavy; only when asked for
        ok, why = nat.wanted(native)
        if not ok:
            self.native_status = why
            return None
        self._native_wait = nat.wait_for_build(native)
        return nat.plan(self)

    def load_native(self, prog: Any) -> None:
        from netsum.switch import native as nat
        self._native_thread = nat.load(self, prog, self._native_wait)

    def wait_native(self, timeout: float | None = None) -> str:
        """Wait for a native build still running in the background; the final status."""
        t = getattr(self, "_native_thread", None)
        if t is not None:
            t.join(timeout)
        return self.native_status

    def _ctx(self, path: str, widths: tuple[int, ...] = ()) -> PrimCtx:
        return PrimCtx(self.layout, ExprCompiler(self.layout, path, widths), self.ns, self.std,
                       self.registers, self.counters, self.meters, self.calculations, path)

    def init_actions(self) -> None:
        srcs = []
        for a in self.action_defs:
            with loading(f"actions[{a.index}]"):
                ctx = self._ctx(a.path, a.widths)
                fname = a.fname
                runs: dict[int, tuple[int, list[str]]] = {}
                for k, run in enumerate(self.lanes.runs.get(a.index, [])):
                    fb = f"{fname}_L{k}"
                    runs[run.start] = (run.stop, run_source(run, self.lanes, ctx, fb))
                    self.ns.names[fb] = LazyFunction(fallback_source(
                        run, self.lanes, self.layout, fb,
                        prim_lines(ctx, a.primitives, run.start, run.stop), self.ns),
                        fb, self.ns.names)
                src = action_source(ctx, fname, a.primitives, runs)
                # Only actions with two or more guarded accesses can change (saves load time).
                # The basic-block form of an action with loops is left as emitted.
                fusable = self.fuse and src.count("    _i = ") >= 2 and "    _pc = 0\n" not in src
                srcs.append(optimize_source(src) + "\n" if fusable else src)
        _compile("".join(srcs), self.ns, "actions")
        for a in self.action_defs:
            spec = ActionSpec(a.name, a.id, a.params, self.ns.names[a.fname], a.fname)
            self._actions_by_id[a.id] = spec
            self.actions.setdefault(a.name, spec)

    def init_value_sets(self) -> None:
        for i, vs in enumerate(_list(self.json, "parse_vsets")):
            path = f"parse_vsets[{i}]"
            if not isinstance(vs, dict) or not isinstance(vs.get("name"), str):
                raise cfg_error(path, f"bad value set {vs!r}")
            path = f"{path} ('{vs['name']}')"
            bits, size = vs.get("compressed_bitwidth"), vs.get("max_size")
            if type(bits) is not int or not 0 < bits <= MAX_FIELD_WIDTH:
                raise cfg_error(path, f"bad compressed_bitwidth {bits!r}")
            if type(size) is not int or not 0 <= size <= MAX_VALUE_SET_SIZE:
                raise cfg_error(path, f"bad max_size {size!r} (0..{MAX_VALUE_SET_SIZE})")
            ident = vs.get("id", i)
            if type(ident) is not int:
                raise cfg_error(path, f"bad id {ident!r}")
            if vs["name"] in self.value_sets:
                raise cfg_error(path, "duplicate value set name")
            self.value_sets[vs["name"]] = ValueSet(vs["name"], ident, bits, size)

    def init_parsers(self) -> None:
        src, start = parser_source(self.parser, self.layout, self.ns,
                                   self._ctx(self.parser.path), inline=self.fuse,
                                   value_sets=self.value_sets)
        _compile(src, self.ns, "parser")
        self.parser_start = self.ns.names[start] if start else None

    def init_deparsers(self) -> None:
        _compile(deparser_source(self.deparser, self.ns), self.ns, "deparser")
        self.deparse = self.ns.names["DEPARSE"]

    # -- pipelines -------------------------------------------------------------------------
    def init_pipelines(self) -> None:
        self.ingress_init = self._init_pipeline(self.controls["ingress"])
        self.egress_init = self._init_pipeline(self.controls["egress"])

    def _init_pipeline(self, ctl: Control) -> Any:
        path = ctl.path
        with loading(path):
            return self._init_control(ctl)

    def _init_control(self, ctl: Control) -> Any:
        path = ctl.path
        self._init_action_profiles(path, ctl.action_profiles)
        nodes: dict[str, str] = {}          # JSON node name -> namespace name
        tables: list[tuple[TableDef, Table]] = []
        for t in ctl.tables:
            with loading(t.path):
                table = build_table(self, t)
            if table.name in self.tables:
                raise cfg_error(t.path, "duplicate table name")
            self.tables[table.name] = table
            nodes[table.name] = self.ns.fresh("N")
            tables.append((t, table))
        for c in ctl.conditionals:
            if c.name in nodes:
                raise cfg_error(c.path, f"node name '{c.name}' used twice")
            nodes[c.name] = self.ns.fresh("N")

        def ref(name: Any, where: str) -> str:
            if name is None:
                return "None"
            if name not in nodes:
                raise cfg_error(where, f"unknown next node {name!r}")
            return nodes[name]

        cond_src: dict[str, str] = {}
        branches: dict[str, tuple[str | None, str | None]] = {}
        for c in ctl.conditionals:
            with loading(c.path):
                comp = ExprCompiler(self.layout, f"{c.path}.expression")
                cond_src[c.name] = comp.cond(c.expression)
                ref(c.true_next, c.path)
                ref(c.false_next, c.path)
                branches[c.name] = (c.true_next, c.false_next)
        fixed = {table.name: ft for t, table in tables
                 if (ft := self._fixed_table(t, table)) is not None}
        inline = {table.name: it for t, table in tables
                  if (it := self._inline_table(t, table)) is not None} if self.fuse else {}
        srcs = [conditional_source(c.name, nodes, cond_src, branches, fixed,
                                   self.inline_depth, inline)
                for c in ctl.conditionals]
        _compile("".join(srcs), self.ns, f"{path} conditionals")
        for c in ctl.conditionals:
            self.node_names[self.ns.names[nodes[c.name]]] = c.name
        plen = self.std.packet_length
        for t, table in tables:
            with loading(t.path):
                meter_target = None
                if table._meter is not None and table._meter.result_target is not None:
                    meter_target = self.layout.slot(list(table._meter.result_target),
                                                    t.path).index
                node = table.make_node(key_function(self, t, table), plen, meter_target)
                self.ns.names[nodes[table.name]] = node
                self.node_names[node] = table.name
        for t, table in tables:
            with loading(t.path):
                nt = t.next_tables
                resolve = {k: self.ns.names[ref(v, f"{t.path}.next_tables")] if v is not None
                           else None for k, v in nt.items()}
                base = t.base_default_next
                base_node = self.ns.names[ref(base, t.path)] if base is not None else None
                # "" stands for the no-op default of a table with no actions.
                by_action = {a: resolve.get(a, base_node) for a in table.action_names or ("",)}
                hm = "__HIT__" in nt or "__MISS__" in nt
                table.link(by_action, resolve.get("__HIT__", base_node),
                           resolve.get("__MISS__", base_node), hm)
                init_entries(self, t, table)
        self._check_acyclic(path, ctl)
        init = ctl.init_table
        return self.ns.names[ref(init, f"{path}.init_table")] if init is not None else None

    def _init_action_profiles(self, path: str, profiles: tuple[Any, ...]) -> None:
        """bmv2's init of `action_profiles`: a selector's hash is its algorithm over its
        input fields, packed like a calculation's field list."""
        for k, ap in enumerate(profiles):
            app = f"{path}.action_profiles[{k}]"
            if not isinstance(ap, dict) or not isinstance(ap.get("name"), str):
                raise cfg_error(app, "expected an object with a string 'name'")
            app = f"{app} ('{ap['name']}')"
            if ap["name"] in self.action_profiles:
                raise cfg_error(app, "duplicate action profile name")
            size = ap.get("max_size", 0)
            if type(size) is not int or size < 0:
                raise cfg_error(app, f"bad max_size {size!r}")
            sel = ap.get("selector")
            hash_fn = None
            if sel is not None:
                if not isinstance(sel, dict) or not isinstance(sel.get("input"), list):
                    raise cfg_error(f"{app}.selector", "expected {algo, input: [...]}")
                for i, el in enumerate(sel["input"]):
                    if not (isinstance(el, dict) and el.get("type") == "field"):
                        raise cfg_error(f"{app}.selector.input[{i}]",
                                        f"selector input {el!r} is not a field")
                hash_fn = build_calculation({"name": ap["name"], "algo": sel.get("algo"),
                                             "input": sel["input"]},
                                            f"{app}.selector", self.layout, self.rng)
            self.action_profiles[ap["name"]] = ActionProfile(
                ap["name"], int(ap.get("id", k)), size, hash_fn, sel is not None)

    @staticmethod
    def _check_acyclic(path: str, ctl: Control) -> None:
        """A control is a DAG (P4 has no loops); a cycle would spin a packet forever."""
        succ: dict[str, list[str]] = {}
        for t in ctl.tables:
            succ[t.name] = [v for v in list(t.next_tables.values()) + [t.base_default_next]
                            if isinstance(v, str)]
        for c in ctl.conditionals:
            succ[c.name] = [v for v in (c.true_next, c.false_next) if isinstance(v, str)]
        state: dict[str, int] = {}          # 1 = on the current path, 2 = done
        for root in succ:
            if state.get(root):
                continue
            stack = [(root, iter(succ[root]))]
            state[root] = 1
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[node] = 2
                    stack.pop()
                elif state.get(nxt) == 1:
                    raise cfg_error(path, f"control flow loops through '{nxt}'")
                elif not state.get(nxt) and nxt in succ:
                    state[nxt] = 1
                    stack.append((nxt, iter(succ[nxt])))

    def _fixed_table(self, t: TableDef, table: Table) -> FixedTable | None:
        """A hidden keyless table with a const default and no direct resources always runs
        the same action and goes to the same next node: conditionals may inline it."""
        if table.kind != "keyless" or not table.default_is_const or table.profile is not None \
                or table.direct_counter is not None or table.direct_meter is not None:
            return None
        de = t.default_entry
        if not isinstance(de, dict):
            return None                  # init_entries reports the problem
        aid = de.get("action_id")
        spec = self._actions_by_id.get(aid) if aid is not None else None
        data = de.get("action_data") or []
        if spec is None or spec.name not in table.action_names or \
                len(data) != len(spec.runtime_data):
            return None                  # init_entries reports the problem
        try:
            params = tuple(parse_hexstr(x, t.path) for x in data)
        except (ConfigError, TypeError):
            return None
        if any(v < 0 or v >> w for v, (_, w) in zip(params, spec.runtime_data)):
            return None
        nt = t.next_tables
        nxt = nt["__MISS__"] if "__MISS__" in nt else nt.get(spec.name, t.base_default_next)
        return FixedTable(spec.fname, params, nxt)

    def _inline_table(self, t: TableDef, table: Table) -> InlineTable | None:
        """An exact or keyless table without direct resources whose next node does not depend
        on the action: conditionals may emit its lookup inline."""
        if table.kind not in ("exact", "keyless") or table.direct_counter is not None or \
                table.direct_meter is not None or table.profile is not None:
            return None
        nt = t.next_tables
        if "__HIT__" in nt or "__MISS__" in nt:
            return None
        base = t.base_default_next
        if any(nt.get(a, base) != base for a in table.action_names):
            return None
        with loading(t.path):
            key = exact_key_source(self, t, table)
        entries = self.ns.ref(table._exact, "E") if key is not None else None
        return InlineTable(self.ns.ref(table, "T"), entries, key or "", base)

    def init_checksums(self) -> None:
        verify, update = [], []
        for c in self.checksums:
            with loading(c.path):
                calc = self.calculations[c.calculation]
                h = self.ns.ref(calc, "H")
                call = f"{h}(F, pkt.data[pkt.off:])" if needs_payload(calc) else f"{h}(F)"
                tgt = c.target
                cond = "True"
                if c.if_cond is not None:
                    cond = ExprCompiler(self.layout, f"{c.path}.if_cond").cond(c.if_cond)
                if c.verify:
                    err = self.std.checksum_error
                    action = f"F[{err}] = 1" if err is not None else "pass"
                    verify.append(f"    if {cond} and {call} != F[{tgt.index}]:\n"
                                  f"        {action}\n")
                if c.update:
                    update.append(f"    if {cond}:\n        F[{tgt.index}] = {call} & {tgt.mask}\n")
        src = ""
        if verify:
            src += "def VERIFY(F, pkt):\n" + "".join(verify) + "    return None\n"
        if update:
            src += "def UPDATE(F, pkt):\n" + "".join(update) + "    return None\n"
        _compile(src, self.ns, "checksums")
        self.verify_checksums = self.ns.names.get("VERIFY")
        self.update_checksums = self.ns.names.get("UPDATE")

    # -- state -----------------------------------------------------------------------------
    def reset_state(self) -> None:
        for r in self.registers.values():
            r.reset()
        for c in self.counters.values():
            c.reset()
        for m in self.meters.values():
            m.reset()
        for t in self.tables.values():
            t.reset()
        for ap in self.action_profiles.values():
            ap.reset()
        self.pre.reset()
