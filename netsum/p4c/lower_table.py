"""Lower tables (keys, action lists, defaults, const entries, direct resources) and the
actions they reference; records each table and action in the control-plane model.

Action localization as p4c leaves it: every use of an action by a table (or by a direct call
in ``apply``) gets its own JSON action; copies of global actions (NoAction) come first in the
control, then local actions in declaration order, one copy per use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from netsum.match import MatchKind

from . import ast as A
from .blocks import (BlockScope, action_env, annotation_arg, control_plane_name, has_annotation,
                     make_instance)
from .calls import CallInfo, CallKind, writable
from .diagnostics import Pos, unknown
from .exprjson import Json, hexstr
from .ir import FieldRef, TBinary, TConst, TExpr, TIsValid, TLoc, TLookahead, TSlice
from .key_names import typed_key_name
from .lower_action import ActionLowering, LowerCtx
from .lower_profile import Profiles
from .newtypes import NewTypeModel, new_type_of, p4runtime_width
from .model import ActionModel, ActionRefModel, ControlPlane, KeyModel, TableModel
from .resolve import const_eval
from .scopes import Env, ExternInstance, Sym, SymKind
from .spelling import expr_text, key_name
from .types import Bits, Bool, EnumT, ErrorT, HeaderT, StructT, UnionT, show, width_of

__all__ = ["TableLowering", "annotation_strings"]

#: The match kinds a key may name (netsum.match: one vocabulary with the switch and P4Runtime).
_MATCH_KINDS = tuple(k.label for k in MatchKind if k is not MatchKind.UNSPECIFIED)
_SKIP_ANNOTATIONS = frozenset({"name", "id", "hidden", "defaultonly", "tableonly", "brief",
                               "description", "field_list", "alias", "metadata", "pipeline",
                               "deparser", "optional"})
#: A key element's annotations are copied as p4c's addAnnotations copies them: only @name, @id
#: and the documentation ones are left out (a key's @hidden is listed, unlike a table's).
_KEY_KEEP = tuple(sorted(_SKIP_ANNOTATIONS - {"name", "id", "brief", "description"}))


def annotation_strings(annos: tuple[A.Annotation, ...],
                       keep: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Annotations as P4Info preamble strings, e.g. '@noWarn("unused")'; ``keep`` names
    annotations P4Info repeats in this place although they also have a field of their own
    (an action reference's @defaultonly/@tableonly beside its scope)."""
    return tuple(f"@{a.name}[{a.body}]" if a.structured else
                 f"@{a.name}" + (f"({a.body})" if a.body else "")
                 for a in annos if a.name not in _SKIP_ANNOTATIONS or a.name in keep)


def explicit_id(annos: tuple[A.Annotation, ...]) -> int | None:
    arg = annotation_arg(annos, "id")
    return arg.value if isinstance(arg, A.IntLit) else None


@dataclass
class _Key:
    json: Json
    model: KeyModel


@dataclass
class TableLowering:
    ctx: LowerCtx
    cp: ControlPlane
    actions: list[Json]  # the program's JSON action list (shared with PipelineState)
    direct_bindings: dict[str, str] = field(default_factory=dict)
    #: Direct counters/meters written inside a table's property (`_inline_direct`).
    inline_externs: list[ExternInstance] = field(default_factory=list)
    scope: BlockScope | None = None
    # (table name, local action name) -> JSON action index
    table_actions: dict[tuple[str, str], int] = field(default_factory=dict)
    call_actions: dict[int, int] = field(default_factory=dict)  # id(call) -> action index
    last_local_names: dict[str, str] = field(default_factory=dict)
    # (temporary, value) pairs the last table's computed keys need, assigned before it runs.
    key_values: list[tuple[TLoc, TExpr]] = field(default_factory=list)
    # The last table's `selector` keys: its action selector's hash input, in key order.
    selector_inputs: list[Json] = field(default_factory=list)
    profiles: Profiles | None = None  # made on first use (needs ctx)
    #: (id(table), id(scope)) -> (table, scope, its actions list resolved there): _listed
    _resolved_lists: dict[tuple[int, int], tuple[A.TableDecl, Env, list[
        tuple[A.Call, tuple[A.Annotation, ...], Sym | None]]]] = field(default_factory=dict)

    def profile_set(self) -> Profiles:
        if self.profiles is None:
            self.profiles = Profiles(self.ctx.diags, self.ctx.g)
        return self.profiles

    def err(self, pos: Pos, msg: str) -> None:
        self.ctx.diags.error(pos, msg)

    # ------------------------------------------------------------ actions
    def begin_control(self, scope: BlockScope, applied: list[A.TableDecl],
                      direct_calls: list[A.Call]) -> None:
        self.scope = scope
        env = scope.env
        # (action name, use key, the call that binds its directional parameters)
        uses: list[tuple[str, tuple[str, str] | int, A.Call | None]] = []
        for t in applied:
            listed = self._action_list(t, env, report=False)
            for aname, call, _ in listed:
                uses.append((aname, (self._tkey(t), aname), call))
            d = self._default_call(t)
            if d is not None and isinstance(d.func, A.Name) and \
                    d.func.name not in [a for a, _, _ in listed]:
                uses.append((d.func.name, (self._tkey(t), d.func.name), None))
        for c in direct_calls:
            assert isinstance(c.func, A.Name)
            uses.append((c.func.name, id(c), c))
        local = {a.name: a for a in scope.actions}
        # Global actions first (p4c inserts their localized copies at the top of the control).
        for aname, key, binding in uses:
            if aname not in local and aname in self.ctx.g.actions:
                self._emit_action(self.ctx.g.actions[aname], aname, key, env, binding)
        for a in scope.actions:
            for aname, key, binding in uses:
                if aname == a.name:
                    self._emit_action(a, control_plane_name(scope.prefix, a), key, env, binding)

    def _emit_action(self, decl: A.ActionDecl, cp_name: str, key: tuple[str, str] | int,
                     env: Env, call: A.Call | None = None) -> None:
        idx = len(self.actions)
        if isinstance(key, tuple):
            self.table_actions[key] = idx
        else:
            self.call_actions[key] = idx
        g = self.ctx.g
        aenv = action_env(env if g.actions.get(decl.name) is not decl
                          else Env(None, g, env.block), decl, g, self.ctx.diags)
        lowering = ActionLowering(self.ctx, self.scope.role if self.scope else "ingress")
        # A direct call binds every parameter (p4c RemoveActionParameters): the action it
        # gets has no action data, in the JSON as in P4Info.
        direct = isinstance(key, int)
        if direct or any(p.direction for p in decl.params):
            prims = self._bound_body(lowering, decl, call, env, aenv, bind_all=direct)
        else:
            prims = lowering.lower_body(decl.body.stmts, aenv)
        runtime: list[Json] = []
        params: list[tuple[str, int]] = []
        ptypes: list[str] = []
        for p in decl.params:
            if p.direction or direct:
                continue
            pt = g.typed.declared(p.type, g, self.ctx.diags)
            if pt is None:
                continue
            if isinstance(pt, EnumT) and pt.underlying is not None:
                self.cp.add_enum(pt)  # action data of a serializable enum: its bits
            elif not isinstance(pt, (Bits, Bool)):
                self.err(p.pos, f"action parameter '{p.name}' has type {show(pt)}; control-plane"
                                " parameters must be bit<W>, int<W>, bool or a serializable "
                                "enum")
                continue
            pname = annotation_arg(p.annotations, "name")
            name = pname.value if isinstance(pname, A.StrLit) else p.name
            runtime.append({"name": name, "bitwidth": width_of(pt)})
            nt = self._new_type(p.type)
            params.append((name, p4runtime_width(nt, width_of(pt))))
            ptypes.append(nt.name if nt is not None else "")
        self.actions.append({"name": cp_name, "id": idx, "runtime_data": runtime,
                             "primitives": prims})
        if not has_annotation(decl.annotations, "hidden"):
            self.cp.add_action(ActionModel(cp_name, tuple(params),
                                           annotation_strings(decl.annotations),
                                           explicit_id(decl.annotations), tuple(ptypes)))

    def _new_type(self, texpr: object) -> NewTypeModel | None:
        """The `type` a declared type names, recorded for P4Info's type_info.new_types."""
        nt = new_type_of(texpr, self.ctx.g)
        if nt is not None:
            self.cp.new_types.setdefault(nt.name, nt)
        return nt

    def _bound_body(self, lowering: ActionLowering, decl: A.ActionDecl, call: A.Call | None,
                    env: Env, aenv: Env, bind_all: bool = False) -> list[Json]:
        """The body of an action whose directional parameters a direct call or an actions
        list entry binds (``a(meta.x)``): inlined with copy-in/copy-out against those
        arguments, its directionless parameters staying runtime data (p4c specializes the
        action per use the same way)."""
        given: list[A.Arg | None] = list(call.args) if call is not None else []
        if call is not None and any(a.name for a in call.args):
            # by name: one slot per parameter (None where the call leaves it out)
            by_name = {a.name: a for a in call.args}
            given = [by_name.get(p.name) for p in decl.params]
        args: list[TExpr | None] = []
        for i, p in enumerate(decl.params):
            if not p.direction and not bind_all:
                sym = aenv.lookup(p.name)
                args.append(sym.value if sym is not None and isinstance(sym.value, TLoc)
                            else None)
                continue
            a = given[i] if i < len(given) else None
            if (a is None or a.value is None) and p.default is not None:
                a = A.Arg(p.pos, p.name, p.default)  # an omitted argument takes its default
            if a is None or a.value is None:
                self.err(call.pos if call is not None else decl.pos,
                         f"action '{decl.name}': its {p.direction} parameter '{p.name}' must be "
                         "bound where the action is used, e.g. actions = { "
                         f"{decl.name}(meta.x); }}")
                return []
            pt = self.ctx.g.typed.declared(p.type, self.ctx.g, self.ctx.diags)
            te = self.ctx.typer.expr(a.value, env, pt) if pt is not None else None
            if te is None:
                return []
            if p.direction not in ("in", "") and not writable(te):
                self.err(a.pos, f"argument '{p.name}' of action '{decl.name}' is an "
                                f"{p.direction} parameter; it needs a writable location, not "
                                f"'{expr_text(a.value)}'")
                return []
            args.append(te)
        info = CallInfo(CallKind.ACTION, decl.name, decl, tuple(args), decl.params, (),
                        call.pos if call is not None else decl.pos)
        prims: list[Json] = []
        returns: list[int] = []
        lowering.inline(info, env, prims)
        lowering.finish(prims, returns)
        return prims

    def _rank(self, t: A.TableDecl) -> tuple[int, ...]:
        assert self.scope is not None
        decl = self.scope.decl
        locals_ = decl.locals if isinstance(decl, A.ControlDecl) else ()
        return self.scope.rank + (next((i for i, x in enumerate(locals_) if x is t), 0),)

    def _tkey(self, t: A.TableDecl) -> str:
        """Tables are keyed by control-plane name: control instances may reuse local names."""
        assert self.scope is not None
        return control_plane_name(self.scope.prefix, t)

    # ------------------------------------------------------------ table properties
    @staticmethod
    def _prop(t: A.TableDecl, name: str) -> A.TableProperty | None:
        for p in t.properties:
            if p.name == name:
                return p
        return None

    def _default_call(self, t: A.TableDecl) -> A.Call | None:
        p = self._prop(t, "default_action")
        if p is None:
            return None
        v = p.value
        if isinstance(v, A.Call):
            return v
        if isinstance(v, A.Name):
            return A.Call(v.pos, v, (), ())
        return None

    def _listed(self, t: A.TableDecl, env: Env) -> list[tuple[A.Call, tuple[A.Annotation, ...],
                                                             Sym | None]]:
        """The table's actions list with each entry's name resolved in env, once per (table,
        scope): the control's action pass, the table itself, its default action and its
        entries all read this."""
        key = (id(t), id(env))
        hit = self._resolved_lists.get(key)
        if hit is not None and hit[0] is t and hit[1] is env:
            return hit[2]
        p = self._prop(t, "actions")
        out: list[tuple[A.Call, tuple[A.Annotation, ...], Sym | None]] = []
        if p is not None:
            assert isinstance(p.value, tuple)  # the parser makes `actions` (annotations, Call)s
            for annos, call in p.value:
                f = call.func
                out.append((call, annos, env.lookup(f.name) if isinstance(f, A.Name) else None))
        self._resolved_lists[key] = (t, env, out)
        return out

    def _listed_syms(self, t: A.TableDecl, env: Env) -> dict[str, Sym | None]:
        return {c.func.name: sym for c, _, sym in self._listed(t, env)
                if isinstance(c.func, A.Name)}

    def _action_list(self, t: A.TableDecl, env: Env,
                     report: bool = True) -> list[tuple[str, A.Call, tuple[A.Annotation, ...]]]:
        out: list[tuple[str, A.Call, tuple[A.Annotation, ...]]] = []
        for call, annos, sym in self._listed(t, env):
            f = call.func
            if not isinstance(f, A.Name):
                if report:
                    self.err(call.pos, "an actions list entry must be an action name")
                continue
            if sym is None or sym.kind is not SymKind.ACTION:
                if report:
                    self.err(f.pos, unknown("action", f.name,
                                            [n for n in env.names()
                                             if (s := env.lookup(n)) is not None
                                             and s.kind is SymKind.ACTION])
                             if sym is None else f"'{f.name}' is a {sym.kind.value}, not an action")
                continue
            out.append((f.name, call, annos))
        return out

    def table(self, t: A.TableDecl, env: Env) -> Json | None:
        assert self.scope is not None
        qname = control_plane_name(self.scope.prefix, t)
        known = ("key", "actions", "default_action", "size", "entries", "counters", "meters",
                 "support_timeout", "implementation", "largest_priority_wins", "priority_delta")
        for p in t.properties:
            if p.name not in known:
                # P4 allows target-specific properties; p4c's BMv2 back end ignores the ones
                # it does not know, with this warning
                self.ctx.diags.warning(p.pos, unknown("table property", p.name, known)
                                       + " (ignored)")
        keys = self._keys(t, env)
        impl_p = self._prop(t, "implementation")
        profile = self.profile_set().bind(qname, impl_p, env, self.selector_inputs) \
            if impl_p is not None else None
        if impl_p is None and self.selector_inputs:
            # p4c drops them too: the table is a plain one matching its other keys
            self.ctx.diags.warning(t.pos, f"table '{t.name}' has 'selector' keys but no "
                                          "action_selector implementation; they are ignored")
        acts = self._action_list(t, env)
        listed = self._listed_syms(t, env)
        if self._prop(t, "actions") is None:
            self.err(t.pos, f"table '{t.name}' has no actions property")
        names = [a for a, _, _ in acts]
        if len(set(names)) != len(names):
            self.err(t.pos, f"table '{t.name}' lists an action twice")
        action_ids: list[int] = []
        action_json_names: list[str] = []
        self.last_local_names = {}
        refs: list[ActionRefModel] = []
        for aname, call, annos in acts:
            idx = self.table_actions.get((self._tkey(t), aname))
            if idx is None:
                continue
            action_ids.append(idx)
            jn = self.actions[idx]["name"]
            action_json_names.append(jn)
            self.last_local_names[aname] = jn
            sym_decl = listed[aname]
            dannos = sym_decl.value.annotations \
                if sym_decl and isinstance(sym_decl.value, A.ActionDecl) else ()
            scope = "DEFAULT_ONLY" if has_annotation(annos + dannos, "defaultonly") else \
                "TABLE_ONLY" if has_annotation(annos + dannos, "tableonly") else ""
            refs.append(ActionRefModel(jn, scope, annotation_strings(
                annos, keep=("defaultonly", "tableonly"))))
            adecl = sym_decl.value if sym_decl is not None else None
            if call.args and isinstance(adecl, A.ActionDecl):
                bound = sum(1 for p in adecl.params if p.direction)
                if len(call.args) > bound:
                    self.err(call.pos, f"action '{aname}' in the actions list of '{t.name}' "
                                       f"binds {len(call.args)} argument(s) but has {bound} "
                                       "directional parameter(s); its action data comes from "
                                       "the control plane")
        # Default action.
        dp = self._prop(t, "default_action")
        dcall = self._default_call(t)
        default_const = bool(dp and dp.is_const)
        default_idx: int | None = None
        default_data: list[int] = []
        if dcall is not None and not isinstance(dcall.func, A.Name):
            self.err(dcall.pos, "default_action must name an action, e.g. default_action = "
                                "drop();")
            dcall = None
            dp = None  # reported; do not also ask for a default action
        if dcall is not None:
            assert isinstance(dcall.func, A.Name)
            dname = dcall.func.name
            default_idx = self.table_actions.get((self._tkey(t), dname))
            if dname not in names:
                self.err(dcall.pos, f"default action '{dname}' is not in the actions list of "
                                    f"table '{t.name}'")
                default_idx = None
            else:
                default_data = self._action_data(dcall, dname, listed[dname], env) or []
        elif "NoAction" in names:
            default_idx = self.table_actions.get((self._tkey(t), "NoAction"))
        elif names and dp is None and self._prop(t, "default_action") is None:
            self.err(t.pos, f"table '{t.name}' needs a default_action (it has no NoAction)")
        size_p = self._prop(t, "size")
        size = 1024
        if size_p is not None:
            assert isinstance(size_p.value, A.Expr)   # `size` is parsed as an expression
            cv = const_eval(size_p.value, self.ctx.g, self.ctx.diags)
            if cv is not None:
                size = int(cv.value)
                if size == 0:
                    size = 1024     # p4c: a size of 0 is the default size (JSON and P4Info)
                elif size < 0:
                    self.err(size_p.pos, f"table size must be positive, got {size}")
                elif size >> 63:
                    self.err(size_p.pos, f"table size {size} does not fit P4Info's int64 size")
        entries_p = self._prop(t, "entries")
        entries_json = self._entries(t, keys, env) if entries_p is not None else None
        max_size = size if size_p is not None or not entries_json else len(entries_json)
        match_type = "exact"
        kinds = [k.model.match_type for k in keys]
        if "range" in kinds:
            match_type = "range"
        elif "ternary" in kinds or "optional" in kinds:
            match_type = "ternary"
        elif "lpm" in kinds:
            match_type = "lpm"
            if kinds.count("lpm") > 1:
                self.err(t.pos, f"table '{t.name}' has more than one lpm key")
        direct_counter = self._direct(t, "counters", "direct_counter", qname)
        direct_meter = self._direct(t, "meters", "direct_meter", qname)
        st = self._prop(t, "support_timeout")
        support_timeout = isinstance(st.value, A.BoolLit) and st.value.value if st else False
        default_name = self.actions[default_idx]["name"] if default_idx is not None else None
        tj: Json = {
            "name": qname, "id": -1, "key": [k.json for k in keys], "match_type": match_type,
            "type": "simple", "max_size": max_size, "with_counters": direct_counter is not None,
            "support_timeout": support_timeout, "direct_meters": direct_meter,
            "action_ids": action_ids, "actions": action_json_names, "base_default_next": None,
            "next_tables": {n: None for n in action_json_names},
            "default_entry": {"action_id": default_idx if default_idx is not None else -1,
                              "action_const": default_const,
                              "action_data": [self._data_hex(default_idx, i, v)
                                              for i, v in enumerate(default_data)],
                              "action_entry_const": default_const},
        }
        if profile is not None:
            # An indirect table: action data comes from the profile's members and groups
            # (p4c writes no default_entry for it).
            del tj["default_entry"]
            head = ("name", "id", "key", "match_type", "type")
            tj = {**{k: tj[k] for k in head[:-1]},
                  "type": "indirect_ws" if profile.selector else "indirect",
                  "action_profile": profile.name,
                  **{k: v for k, v in tj.items() if k not in head}}
        if entries_json is not None:
            tj["entries"] = entries_json
        if not has_annotation(t.annotations, "hidden"):
            resources = tuple(x for x in (direct_counter, direct_meter) if x)
            self.cp.tables.append(TableModel(
                qname, tuple(k.model for k in keys), tuple(refs), default_name or "",
                tuple(default_data), default_const, size, bool(entries_p and entries_p.is_const),
                entries_p is not None and bool(entries_json), resources,
                annotation_strings(t.annotations), explicit_id(t.annotations),
                self._rank(t), profile.name if profile is not None else "",
                bool(support_timeout)))
        return tj

    def _data_hex(self, idx: int | None, i: int, v: int) -> str:
        if idx is None:
            return hex(v)
        rd = self.actions[idx]["runtime_data"]
        w = rd[i]["bitwidth"] if i < len(rd) else None
        return hexstr(v, w)["value"]

    def _action_data(self, call: A.Call, aname: str, sym: Sym | None,
                     env: Env) -> list[int] | None:
        """The action data a default action or an entry gives (aname: its action, listed
        in the table's actions list as sym)."""
        if sym is None or not isinstance(sym.value, A.ActionDecl):
            return None
        decl = sym.value
        params = [p for p in decl.params if not p.direction]
        # The directional arguments (written first) repeat what the actions list binds; the
        # directionless ones are the action data.
        bound = len(decl.params) - len(params)
        args = call.args[bound:] if len(call.args) == len(decl.params) else call.args
        if len(args) != len(params):
            self.err(call.pos, f"action '{aname}' takes {len(params)} argument(s), got "
                               f"{len(call.args)}")
            return None
        out: list[int] = []
        for p, a in zip(params, args):
            pt = self.ctx.g.typed.declared(p.type, self.ctx.g, self.ctx.diags)
            if a.value is None or pt is None:
                return None
            te = self.ctx.typer.expr(a.value, env, pt)
            if te is None:
                return None
            if not isinstance(te, TConst):
                self.err(a.pos, f"argument '{p.name}' of default action '{aname}' must be a "
                                "compile-time constant")
                return None
            c = self.ctx.typer.coerce(te, pt, a.pos, f"argument '{p.name}' of '{aname}'")
            if not isinstance(c, TConst):   # None after an error; a TConst stays a TConst
                return None
            out.append(int(c.value))
        return out

    def _direct(self, t: A.TableDecl, prop: str, extern: str, qname: str) -> str | None:
        p = self._prop(t, prop)
        if p is None:
            return None
        assert self.scope is not None
        v = p.value
        if isinstance(v, A.Call) and isinstance(v.func, A.Name) and v.func.name == extern:
            made = self._inline_direct(t, p, v, extern)
            if made is None:
                return None
            inst = made
        else:
            sym = self.scope.env.lookup(v.name) if isinstance(v, A.Name) else None
            if sym is None or sym.kind is not SymKind.EXTERN or \
                    not isinstance(sym.value, ExternInstance) or sym.value.extern != extern:
                self.err(p.pos, f"table property '{prop}' must name a {extern} instance")
                return None
            inst = sym.value
        prev = self.direct_bindings.get(inst.name)
        if prev is not None and prev != qname:
            self.err(p.pos, f"{extern} '{inst.name}' is already attached to table '{prev}'")
            return None
        self.direct_bindings[inst.name] = qname
        return inst.name

    def _inline_direct(self, t: A.TableDecl, p: A.TableProperty, call: A.Call,
                       extern: str) -> ExternInstance | None:
        """`@name("n") counters = direct_counter(...);` (ngsdn writes them so): an instance
        named by the annotation as written, as p4c names it (no control prefix)."""
        named = annotation_arg(p.annotations, "name")
        if not isinstance(named, A.StrLit):
            self.err(p.pos, f"table '{t.name}': a {extern} written in the table needs a @name "
                            "annotation (P4Runtime names it by that)")
            return None
        decl = A.Instantiation(call.pos, p.annotations, named.value.lstrip("."),
                               A.TypeName(call.func.pos, extern), call.args)
        inst = make_instance(decl, "", self.ctx.g, self.ctx.diags, self._rank(t))
        if inst is not None:
            self.inline_externs.append(inst)
        return inst

    def _keys(self, t: A.TableDecl, env: Env) -> list[_Key]:
        p = self._prop(t, "key")
        out: list[_Key] = []
        self.key_values = []
        self.selector_inputs = []
        if p is None:
            return out
        assert isinstance(p.value, tuple)   # the parser makes `key` a tuple of KeyElement
        for ke in p.value:
            assert isinstance(ke, A.KeyElement)
            if ke.match_kind == "selector":
                self._selector_key(ke, env)
                continue
            if ke.match_kind not in _MATCH_KINDS:
                self.err(ke.match_kind_pos, unknown("match kind", ke.match_kind, _MATCH_KINDS))
                continue
            name_arg = annotation_arg(ke.annotations, "name")
            derived = key_name(ke.expr)
            if not isinstance(name_arg, A.StrLit) and derived is None:
                # As p4c's TableKeyNames: only fields, indexes, slices, `&`, constants and
                # isValid() have a name of their own for P4Info.
                self.err(ke.expr.pos, f"table key '{expr_text(ke.expr)}': a computed key needs "
                                      "a @name annotation (its P4Info name)")
                continue
            name = name_arg.value if isinstance(name_arg, A.StrLit) else str(derived)
            te = self.ctx.typer.expr(ke.expr, env)
            if te is None:
                continue
            if not isinstance(te.type, (Bits, Bool, EnumT, ErrorT)):
                self.err(ke.expr.pos, f"table key '{name}' has type {show(te.type)}")
                continue
            if not isinstance(name_arg, A.StrLit):
                name = typed_key_name(ke.expr, lambda x: self._type_name(x, env),
                                      self.ctx.g.field_annotations) or name
            if isinstance(te.type, EnumT):
                self.cp.add_enum(te.type)  # P4Info describes a serializable enum key's type
            mask: int | None = None
            base: TExpr = te
            if isinstance(te, TIsValid):
                target = [te.header, "$valid$"]
                width = 1
            else:
                if isinstance(te, TSlice):
                    base = te.operand
                    mask = ((1 << (te.hi - te.lo + 1)) - 1) << te.lo
                elif isinstance(te, TBinary) and te.op == "&" and isinstance(te.right, TConst) \
                        and isinstance(te.left, TLoc) and isinstance(te.left.ref, FieldRef):
                    base = te.left  # `field & mask`: BMv2 matches the field under the mask
                    mask = int(te.right.value)
                if not (isinstance(base, TLoc) and isinstance(base.ref, FieldRef)):
                    # Any other expression is computed into a temporary just before the
                    # table is applied (p4c SimplifyKey); the key matches the temporary.
                    base = self.ctx.layout.temp(te.type, te.pos)
                    self.key_values.append((base, te))
                    mask = None
                assert isinstance(base, TLoc) and isinstance(base.ref, FieldRef)
                target = [base.ref.header, base.ref.field]
                width = width_of(te.type)
            kj: Json = {"match_type": ke.match_kind, "name": name, "target": target,
                        "mask": None}
            if mask is not None:
                kj["mask"] = hexstr(mask, width_of(base.type))["value"]
            nt = None
            if mask is None and isinstance(base, TLoc) and isinstance(base.ref, FieldRef):
                htype = self._header_types().get(base.ref.header)
                declared = self.ctx.g.field_types.get((htype, base.ref.field)) if htype else None
                nt = self._new_type(declared) if declared is not None else None
            out.append(_Key(kj, KeyModel(name, p4runtime_width(nt, width), ke.match_kind,
                                         annotation_strings(ke.annotations, _KEY_KEEP),
                                         nt.name if nt is not None else "")))
        return out

    def _type_name(self, e: A.Expr, env: Env) -> str | None:
        """The struct/header/union type name of a key's sub-expression (for its fields'
        @name), as the type check recorded it when it typed the whole key (a lookahead is
        no value here)."""
        te = env.typed_as(e)
        if te is not None and not isinstance(te, TLookahead) and \
                isinstance(te.type, (StructT, HeaderT, UnionT)):
            return te.type.name
        return None

    def _header_types(self) -> dict[str, str]:
        """Header instance -> its header type's name."""
        return {i.name: i.type.name for i in self.ctx.layout.instances}

    def _selector_key(self, ke: A.KeyElement, env: Env) -> None:
        """A ``selector`` key: one input of the action selector's hash, not a match field."""
        te = self.ctx.typer.expr(ke.expr, env)
        if te is None:
            return
        if not (isinstance(te, TLoc) and isinstance(te.ref, FieldRef)):
            self.err(ke.expr.pos, f"unsupported construct: selector key "
                                  f"'{expr_text(ke.expr)}' that is not a field")
            return
        self.selector_inputs.append({"type": "field", "value": [te.ref.header, te.ref.field]})

    def _entries(self, t: A.TableDecl, keys: list[_Key], env: Env) -> list[Json]:
        listed = self._listed_syms(t, env)
        p = self._prop(t, "entries")
        assert p is not None
        # `entries` without const (P4_16 1.2.4 initial entries) go into the JSON the same way;
        # P4Info says has_initial_entries without is_const_table.
        out: list[Json] = []
        assert isinstance(p.value, tuple)   # the parser makes `entries` a tuple of TableEntry
        for i, ent in enumerate(p.value):
            assert isinstance(ent, A.TableEntry)
            if len(ent.keyset) != len(keys):
                self.err(ent.pos, f"entry has {len(ent.keyset)} key value(s), table "
                                  f"'{t.name}' has {len(keys)} key(s)")
                continue
            mk: list[Json] = []
            for ks, k in zip(ent.keyset, keys):
                j = self._entry_key(ks, k, env)
                if j is None:
                    break
                mk.append(j)
            else:
                f = ent.action.func
                aname = f.name if isinstance(f, A.Name) else "?"
                idx = self.table_actions.get((self._tkey(t), aname))
                if idx is None:
                    self.err(ent.action.pos, f"'{aname}' is not an action of table '{t.name}'")
                    continue
                sym = listed[aname] if aname in listed else env.lookup(aname)
                data = self._action_data(ent.action, aname, sym, env) or []
                prio = i + 1
                if ent.priority is not None:
                    cv = const_eval(ent.priority, self.ctx.g, self.ctx.diags)
                    prio = int(cv.value) if cv else prio
                out.append({"match_key": mk, "action_entry": {
                    "action_id": idx,
                    "action_data": [self._data_hex(idx, j, v) for j, v in enumerate(data)]},
                    "priority": prio})
        return out

    def _entry_key(self, ks: A.Expr, k: _Key, env: Env) -> Json | None:
        mt = k.model.match_type
        w = k.model.bitwidth
        t = Bits(w)
        full = (1 << w) - 1

        def val(e: A.Expr) -> int | None:
            te = self.ctx.typer.expr(e, env, t)
            if te is None:
                return None
            if not isinstance(te, TConst):
                self.err(e.pos, "table entry keys must be compile-time constants")
                return None
            return int(te.value) & full

        def hx(v: int) -> str:
            return hexstr(v, w)["value"]

        if isinstance(ks, A.Default):
            if mt == "exact":
                self.err(ks.pos, "an exact key cannot be a wildcard")
                return None
            if mt == "lpm":
                return {"match_type": "lpm", "key": hx(0), "prefix_length": 0}
            if mt == "range":
                return {"match_type": "range", "start": hx(0), "end": hx(full)}
            return {"match_type": mt, "key": hx(0), "mask": hx(0)}
        if isinstance(ks, A.Mask):
            v, m = val(ks.value), val(ks.mask)
            if v is None or m is None:
                return None
            if mt == "lpm":
                plen = bin(m).count("1")
                return {"match_type": "lpm", "key": hx(v & m), "prefix_length": plen}
            if mt not in ("ternary", "optional"):
                self.err(ks.pos, f"a masked value needs a ternary key, not {mt}")
                return None
            return {"match_type": "ternary", "key": hx(v & m), "mask": hx(m)}
        if isinstance(ks, A.Range):
            lo, hi = val(ks.lo), val(ks.hi)
            if lo is None or hi is None:
                return None
            if mt != "range":
                self.err(ks.pos, f"a range needs a range key, not {mt}")
                return None
            return {"match_type": "range", "start": hx(lo), "end": hx(hi)}
        v = val(ks)
        if v is None:
            return None
        if mt == "exact":
            return {"match_type": "exact", "key": hx(v)}
        if mt == "lpm":
            return {"match_type": "lpm", "key": hx(v), "prefix_length": w}
        if mt == "range":
            return {"match_type": "range", "start": hx(v), "end": hx(v)}
        if mt == "optional":
            return {"match_type": "optional", "key": hx(v), "mask": hx(full)}
        return {"match_type": "ternary", "key": hx(v), "mask": hx(full)}

    # ------------------------------------------------------------ hidden tables
    @staticmethod
    def _keyless(name: str, action: Json) -> Json:
        return {"name": name, "id": -1, "key": [], "match_type": "exact", "type": "simple",
                "max_size": 1024, "with_counters": False, "support_timeout": False,
                "direct_meters": None, "action_ids": [action["id"]],
                "actions": [action["name"]], "base_default_next": None,
                "next_tables": {action["name"]: None},
                "default_entry": {"action_id": action["id"], "action_const": True,
                                  "action_data": [], "action_entry_const": True}}

    def hidden_table(self, name: str, action: Json) -> Json:
        tj = self._keyless(name, action)
        # The hidden action's id is assigned later (post-order); keep a live reference.
        tj["_action"] = action
        return tj

    def direct_call_table(self, call: A.Call, info: CallInfo, env: Env) -> Json | None:
        idx = self.call_actions.get(id(call))
        if idx is None:
            return None
        act = self.actions[idx]
        decl = info.target
        assert isinstance(decl, A.ActionDecl) and isinstance(call.func, A.Name)
        base = decl.name
        return self._keyless(self.ctx.names.new(f"tbl_{base}"), act)

    def finish_ids(self, tables: list[Json]) -> None:
        """Fill the ids of hidden actions (known only after the control is done)."""
        for tj in tables:
            act = tj.pop("_action", None)
            if act is not None:
                tj["action_ids"] = [act["id"]]
                tj["default_entry"]["action_id"] = act["id"]
