"""Lower an ingress/egress control to a BMv2 pipeline: tables, conditionals, actions.

The apply block becomes a graph built in source order (p4c numbers ``node_<n>`` conditionals
with one counter over all graph nodes, two per pipeline for its entry and exit).  Each fragment
returns its entry node and the "holes" (next pointers) still to fill with what follows.
Actions are localized the way p4c's LocalizeAllActions/DuplicateActions leave them: one JSON
action per use, global ones (NoAction) copied to the front of the control.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import ast as A
from .blocks import BlockScope, SubControl, block_scope, control_plane_name
from .calls import CallInfo, CallKind, resolve_call
from .diagnostics import Diagnostics, Pos
from .exprjson import Json, as_condition, ref_json
from .ir import TConst, TExpr, TLoc
from .lower_action import ActionLowering, LowerCtx
from .lower_table import TableLowering
from .resolve import ConstValue, const_eval
from .scopes import Env, Sym, SymKind
from .synthesize import direct_action_call, group_order, hidden_action_base, is_simple
from .types import Bits, Bool, show
from .visit import nodes

__all__ = ["PipelineState", "ControlLowering"]

Hole = Callable[[str | None], None]


@dataclass
class Frag:
    entry: str | None
    holes: list[Hole]
    terminal: bool = False


@dataclass
class PipelineState:
    """Counters shared by both pipelines (ids are unique per category in the whole JSON)."""

    actions: list[Json] = field(default_factory=list)
    node_counter: int = 0
    table_id: int = 0
    cond_id: int = 0
    applied: dict[str, Pos] = field(default_factory=dict)
    #: Tables applied as plain statements: qualified name -> (entry node, the successor each
    #: application was given).  p4c-bm2-ss accepts a table applied in several places when
    #: every application is followed by the same node (one next_tables serves them all).
    plain: dict[str, tuple[str, list[tuple[Pos, str | None]]]] = field(default_factory=dict)


class ControlLowering:
    def __init__(self, ctx: LowerCtx, scope: BlockScope, ps: PipelineState,
                 tables: TableLowering, parent: "ControlLowering | None" = None) -> None:
        self.ctx = ctx
        self.scope = scope
        self.ps = ps
        self.tl = tables
        self.env = scope.env
        self.parent = parent
        # A control instance applied inside another control adds its nodes to the parent's
        # pipeline (p4c inlines it); only the hidden-action ranks are its own.
        self.tables: list[Json] = parent.tables if parent else []
        self.conds: list[Json] = parent.conds if parent else []
        self.action_names = {a.name for a in scope.actions} | set(ctx.g.actions)
        decl = scope.decl
        assert isinstance(decl, A.ControlDecl)
        self.decl = decl
        # MoveDeclarations left no declarations in apply (initializers are assignments).
        # An `if` on a constant keeps only its taken branch before anything looks at the
        # body, so the other branch's tables and actions are not used at all (as in p4c).
        self.body = self._fold_constant_ifs(decl.apply)
        self.order = group_order(self.body, self._table_call)
        self.hidden: list[tuple[float, Json, list[A.Stmt], Env]] = \
            parent.hidden if parent else []
        self.rank_base: float = (parent.rank_base + 1e6) if parent else 0.0
        self.entry_of: dict[str, str] = parent.entry_of if parent else {}

    def err(self, pos: Pos, msg: str) -> None:
        self.ctx.diags.error(pos, msg)

    def _fold_constant_ifs(self, b: A.Block) -> A.Block:
        consts = {n: s.value for n, s in self.env.syms.items()
                  if s.kind is SymKind.CONST and isinstance(s.value, ConstValue)}

        def stmt(x: A.Stmt) -> A.Stmt:
            match x:
                case A.If(cond=c, then=t, other=o):
                    cv = const_eval(c, self.ctx.g, Diagnostics(), consts) \
                        if not self._mentions_apply(c) else None
                    if cv is not None and isinstance(cv.value, bool):
                        taken = t if cv.value else o
                        return stmt(taken) if taken is not None else A.EmptyStmt(x.pos)
                    return A.If(x.pos, c, stmt(t), stmt(o) if o is not None else None)
                case A.Block(stmts=ss):
                    return A.Block(x.pos, tuple(stmt(y) for y in ss))
                case A.Switch(cases=cs):
                    return A.Switch(x.pos, x.expr, tuple(
                        A.SwitchCase(c.pos, c.label, block(c.body) if c.body else None, c.value)
                        for c in cs))
            return x

        def block(x: A.Block) -> A.Block:
            out = stmt(x)
            assert isinstance(out, A.Block)
            return out

        return block(b)

    # ------------------------------------------------------------ entry point
    def run(self, name: str, pid: int) -> Json:
        self.ps.node_counter += 2  # p4c's graph: entry and exit nodes of this control
        applied = self._applied_tables()
        self.tl.begin_control(self.scope, applied, self._direct_calls())
        frag = self._seq(self.body.stmts, self.env)
        for h in frag.holes:
            h(None)
        self._check_reapplied()
        # Hidden actions follow the control's own actions, in block post-order.
        for _, act, group, genv in sorted(self.hidden, key=lambda x: x[0]):
            lowering = ActionLowering(self.ctx, self.scope.role)
            prims: list[Json] = act["primitives"]
            returns: list[int] = []
            lowering._stmts(tuple(group), genv, prims, returns)
            lowering.finish(prims, returns)
            act["id"] = len(self.ps.actions)
            self.ps.actions.append(act)
        self.tl.finish_ids(self.tables)
        return {"name": name, "id": pid, "init_table": frag.entry, "tables": self.tables,
                "action_profiles": self.tl.profile_set().take_pipeline(),
                "conditionals": self.conds}

    def _check_reapplied(self) -> None:
        """Refuse, as p4c-bm2-ss does, a table applied in several places but followed by
        different nodes (controlFlowGraph.cpp: 'has multiple successors')."""
        for qname, (entry, nexts) in self.ps.plain.items():
            last = max((pos for pos, _ in nexts), key=lambda p: (p.line, p.col))
            if any(nxt == entry for _, nxt in nexts):
                self.err(last, f"table '{qname}' is applied twice in a row; BMv2 tables "
                               "cannot follow themselves (a loop in the control graph)")
            elif len({nxt for _, nxt in nexts}) > 1:
                self.err(last, f"table '{qname}' is applied more than once (first at "
                               f"{self.ps.applied[qname]}) with different successors "
                               f"({', '.join(sorted(str(n) for _, n in nexts))}); BMv2 "
                               "allows one successor per table")
        self.ps.plain.clear()

    def _applied_tables(self) -> list[A.TableDecl]:
        names = {n.func.expr.name for n in nodes(self.body)
                 if isinstance(n, A.Call) and isinstance(n.func, A.Member)
                 and n.func.member == "apply" and isinstance(n.func.expr, A.Name)}
        return [t for t in self.scope.tables if t.name in names]

    def _direct_calls(self) -> list[A.Call]:
        calls: list[A.Call] = []

        def walk(s: A.Node | None) -> None:
            match s:
                case A.Block(stmts=ss):
                    for x in ss:
                        walk(x)
                case A.If(then=t, other=o):
                    walk(t)
                    walk(o)
                case A.Switch(cases=cs):
                    for c in cs:
                        walk(c.body)
                case A.CallStmt(call=c) if self._table_call(s):
                    calls.append(c)

        walk(self.body)
        return calls

    def _table_call(self, s: A.Stmt) -> bool:
        """A direct action call that becomes its own hidden table (p4c MoveActionsToTables):
        every argument is bound in the action it gets (directionless ones as ``in``: a
        run-time value is read where the call is, as p4c's specialized copy reads it), so
        that action has no action data."""
        if not (direct_action_call(s, self.action_names) and isinstance(s, A.CallStmt)):
            return False
        f = s.call.func
        assert isinstance(f, A.Name)
        sym = self.env.bind(f)
        return isinstance(sym.value if sym is not None else None, A.ActionDecl)

    # ------------------------------------------------------------ nodes
    def _new_node_name(self) -> int:
        n = self.ps.node_counter
        self.ps.node_counter += 1
        return n

    def _table_json(self, tj: Json) -> None:
        self._new_node_name()
        tj["id"] = self.ps.table_id
        self.ps.table_id += 1
        self.tables.append(tj)

    @staticmethod
    def _set_all(tj: Json) -> Hole:
        def fill(nxt: str | None) -> None:
            tj["base_default_next"] = nxt
            for k in tj["next_tables"]:
                if tj["next_tables"][k] == "$hole":
                    tj["next_tables"][k] = nxt
        return fill

    @staticmethod
    def _set_key(d: Json, key: str) -> Hole:
        def fill(nxt: str | None) -> None:
            d[key] = nxt
        return fill

    # ------------------------------------------------------------ statements
    def _seq(self, stmts: tuple[A.Stmt, ...], env: Env) -> Frag:
        frags: list[Frag] = []
        group: list[A.Stmt] = []
        terminal = False
        for s in stmts:
            if is_simple(s, self._table_call):
                group.append(s)
                if isinstance(s, A.Exit):
                    frags.append(self._group(group, env))
                    group = []
                    terminal = True
                    break
                continue
            if group:
                frags.append(self._group(group, env))
                group = []
            if isinstance(s, A.Return):
                terminal = True
                break
            frags.append(self._stmt(s, env))
            if frags[-1].terminal:
                terminal = True
                break
        if group:
            frags.append(self._group(group, env))
        return self._link(frags, terminal)

    @staticmethod
    def _link(frags: list[Frag], terminal: bool) -> Frag:
        entry: str | None = None
        pending: list[Hole] = []
        started = False
        for f in frags:
            if f.entry is None:
                if f.terminal:
                    for h in pending:
                        h(None)
                    pending = []
                    return Frag(entry, [], terminal=not started)
                continue
            if not started:
                entry = f.entry
                started = True
            for h in pending:
                h(f.entry)
            pending = f.holes
        if terminal:
            for h in pending:
                h(None)
            return Frag(entry, [], terminal=entry is None)
        return Frag(entry, pending)

    def _group(self, group: list[A.Stmt], env: Env) -> Frag:
        """A hidden action + table for a statement group.  The body is lowered later, in block
        post-order like p4c's passes, so temporaries get p4c's numbering (every variable is
        a control local by now, so the env binds the same names then as now)."""
        first = group[0]
        base = hidden_action_base(first.pos.file, first.pos.line)
        aname = self.ctx.names.new(base)
        act: Json = {"name": aname, "id": -1, "runtime_data": [], "primitives": []}
        rank = self.rank_base + self.order.get(id(first), len(self.order))
        self.hidden.append((rank, act, group, env))
        tname = self.ctx.names.new(f"tbl_{aname}")
        tj = self.tl.hidden_table(tname, act)
        self._table_json(tj)
        for k in tj["next_tables"]:
            tj["next_tables"][k] = "$hole"
        return Frag(tname, [self._set_all(tj)])

    def _stmt(self, s: A.Stmt, env: Env) -> Frag:
        if is_simple(s, self._table_call) or isinstance(s, A.Return):
            return self._seq((s,), env)  # e.g. the branch of `if (c) exit;`
        match s:
            case A.Block(stmts=ss):
                return self._seq(ss, env.child())
            case A.EmptyStmt():
                return Frag(None, [])
            case A.CallStmt(call=c):
                return self._call(c, env, s)
            case A.If():
                return self._if(s, env)
            case A.Switch():
                return self._switch(s, env)
            case A.For():
                self.err(s.pos, "unsupported construct: a for loop in an apply block that "
                                "applies a table or a control, or returns (BMv2's control "
                                "graph has no loops)")
                return Frag(None, [])
        self.err(s.pos, f"unsupported construct: {type(s).__name__} in an apply block")
        return Frag(None, [])

    def _call(self, c: A.Call, env: Env, s: A.Stmt) -> Frag:
        info = resolve_call(c, env, self.ctx.typer)
        if info is None:
            return Frag(None, [])
        if info.kind is CallKind.APPLY:
            assert isinstance(info.target, A.TableDecl)   # an APPLY call's target is a table
            again = self.ps.plain.get(control_plane_name(self.scope.prefix, info.target))
            if again is not None:
                # Applied again as a statement: the same node, checked at the end to be
                # followed by the same successor as every other application.
                return Frag(again[0], [lambda nxt: again[1].append((c.pos, nxt))])
            tj = self._apply(info.target, c.pos)
            if tj is None:
                return Frag(None, [])
            for k in tj["next_tables"]:
                tj["next_tables"][k] = "$hole"
            nexts: list[tuple[Pos, str | None]] = []
            self.ps.plain[control_plane_name(self.scope.prefix, info.target)] = \
                (self._entry(tj), nexts)
            fill = self._set_all(tj)

            def record(nxt: str | None) -> None:
                nexts.append((c.pos, nxt))
                fill(nxt)
            return Frag(self._entry(tj), [record])
        if info.kind is CallKind.SUBAPPLY:
            return self._sub_apply(info)
        if info.kind is CallKind.ACTION:
            tj = self.tl.direct_call_table(c, info, env)
            if tj is None:
                return Frag(None, [])
            self._table_json(tj)
            for k in tj["next_tables"]:
                tj["next_tables"][k] = "$hole"
            return Frag(tj["name"], [self._set_all(tj)])
        return self._group([s], env)

    def _sub_apply(self, info: CallInfo) -> Frag:
        """``inst.apply(args)``: inline the control instance's graph here (names prefixed with
        the instance, as p4c's inliner does); parameters are bound to the arguments."""
        sub = info.target
        assert isinstance(sub, SubControl)
        prev = self.ps.applied.get(info.qualified)
        if prev is not None and self._has_tables(sub.decl):
            self.err(info.pos, f"control instance '{info.name}' is applied more than once "
                               f"(first at {prev}); its tables can be applied only once")
            return Frag(None, [])
        self.ps.applied.setdefault(info.qualified, info.pos)
        bindings: dict[str, Sym] = {p: Sym(x.kind, p, x.value, x.qualified)
                                    for p, x in info.externs}
        copies: list[tuple[TLoc, TExpr]] = []
        for p, a in zip(info.params, info.args):
            if a is None and p.default is not None:
                pt = self.ctx.g.typed.declared(p.type, self.ctx.g, self.ctx.diags)
                a = self.ctx.typer.expr(p.default, self.env, pt) if pt is not None else None
            if a is None:
                continue
            if isinstance(a, TConst):
                bindings[p.name] = Sym(SymKind.CONST, p.name, ConstValue(a.type, a.value))
            elif isinstance(a, TLoc):
                bindings[p.name] = Sym(SymKind.VAR, p.name, TLoc(a.type, a.pos, a.ref, a.text))
            elif p.direction in ("", "in"):
                # A computed value for an `in` parameter: evaluated into a copy first.
                tmp = self.ctx.layout.copy_of(p.name, a.type, a.pos)
                if tmp is None:
                    self.err(a.pos, f"unsupported construct: an argument of type "
                                    f"{show(a.type)} for parameter '{p.name}'")
                    return Frag(None, [])
                copies.append((tmp, a))
                bindings[p.name] = Sym(SymKind.VAR, p.name, tmp)
            else:
                self.err(a.pos, f"argument for {p.direction} parameter '{p.name}' must be a "
                                "writable location")
                return Frag(None, [])
        if not self._ctor_bindings(sub, bindings):
            return Frag(None, [])
        scope = block_scope(self.scope.role, sub.decl, self.ctx.layout, self.ctx.g,
                            self.ctx.diags, prefix=info.qualified, bindings=bindings,
                            rank=sub.rank)
        self.ctx.sub_scopes.append(scope)
        first = self._assignments(copies, info.pos) if copies else None
        child = ControlLowering(self.ctx, scope, self.ps, self.tl, parent=self)
        self.tl.begin_control(scope, child._applied_tables(), child._direct_calls())
        frag = child._seq(child.body.stmts, child.env)
        self.tl.scope = self.scope
        return self._link([first, frag], False) if first is not None else frag

    def _ctor_bindings(self, sub: SubControl, bindings: dict[str, Sym]) -> bool:
        """A control's constructor parameters, bound to the instantiation's arguments: a
        control or extern instance of the enclosing control (shared: its objects keep the
        names of where it was declared, as p4c names them), or a compile-time constant."""
        params = sub.decl.ctor_params
        args = sub.inst.args
        if len(args) != len(params):
            if args or params:
                self.err(sub.inst.pos, f"'{sub.decl.name}' takes {len(params)} constructor "
                                       f"argument(s), got {len(args)}")
                return False
            return True
        for p, a in zip(params, args):
            if a.value is None:
                continue
            if isinstance(a.value, A.Name):
                sym = self.env.lookup(a.value.name)
                if sym is not None and sym.kind in (SymKind.SUBCONTROL, SymKind.EXTERN):
                    bindings[p.name] = Sym(sym.kind, p.name, sym.value, sym.qualified)
                    continue
            pt = self.ctx.g.typed.declared(p.type, self.ctx.g, self.ctx.diags)
            cv = const_eval(a.value, self.ctx.g, self.ctx.diags)
            if pt is None or cv is None:
                return False
            if not isinstance(pt, (Bits, Bool)):
                self.err(a.pos, f"unsupported construct: constructor parameter '{p.name}' of "
                                f"type {show(pt)}")
                return False
            value = int(cv.value) & ((1 << pt.width) - 1) if isinstance(pt, Bits) else cv.value
            bindings[p.name] = Sym(SymKind.CONST, p.name, ConstValue(pt, value))
        return True

    def _assignments(self, pairs: list[tuple[TLoc, TExpr]], pos: Pos) -> Frag:
        """A hidden action + table assigning typed values (argument copies, computed keys)."""
        base = hidden_action_base(pos.file, pos.line)
        aname = self.ctx.names.new(base)
        prims: list[Json] = []
        lowering = ActionLowering(self.ctx, self.scope.role)
        for tmp, value in pairs:
            lowering.assign(tmp, value, pos, prims)
        act: Json = {"name": aname, "id": -1, "runtime_data": [], "primitives": prims}
        self.hidden.append((self.rank_base + len(self.order) + len(self.hidden) * 1e-3, act,
                            [], Env(None, self.ctx.g)))
        tj = self.tl.hidden_table(self.ctx.names.new(f"tbl_{aname}"), act)
        self._table_json(tj)
        for k in tj["next_tables"]:
            tj["next_tables"][k] = "$hole"
        return Frag(tj["name"], [self._set_all(tj)])

    def _has_tables(self, decl: A.ControlDecl, depth: int = 0) -> bool:
        """Whether applying this control applies a table (then it can be applied once only;
        without tables each application is inlined anew, as p4c does)."""
        for x in decl.locals:
            if isinstance(x, A.TableDecl):
                return True
            if isinstance(x, A.Instantiation) and isinstance(x.type, A.TypeName) and \
                    x.type.name in self.ctx.g.controls and depth < 16 and \
                    self._has_tables(self.ctx.g.controls[x.type.name], depth + 1):
                return True
        return False

    def _apply(self, table: A.TableDecl, pos: Pos) -> Json | None:
        qname = control_plane_name(self.scope.prefix, table)
        prev = self.ps.applied.get(qname)
        if prev is not None:
            self.err(pos, f"table '{table.name}' is applied more than once (first at {prev}); "
                          "BMv2 allows one application per table")
            return None
        self.ps.applied[qname] = pos
        tj = self.tl.table(table, self.env)
        if tj is None:
            return None
        keys = list(self.tl.key_values)
        if keys:
            # Computed keys: a hidden table right before this one sets their temporaries.
            first = self._assignments(keys, pos)
            for h in first.holes:
                h(tj["name"])
            assert first.entry is not None
            self.entry_of[tj["name"]] = first.entry
        self._table_json(tj)
        return tj

    def _entry(self, tj: Json) -> str:
        """The node that runs a table: the table, or the one setting its computed keys."""
        return str(self.entry_of.get(tj["name"], tj["name"]))

    @staticmethod
    def _table_apply_of(e: A.Expr) -> tuple[str, str, bool] | None:
        """(table, 'hit'|'miss', negated) for conditions like !t.apply().hit."""
        neg = False
        while isinstance(e, A.Unary) and e.op == "!":
            neg = not neg
            e = e.operand
        if isinstance(e, A.Member) and e.member in ("hit", "miss") and \
                isinstance(e.expr, A.Call) and isinstance(e.expr.func, A.Member) and \
                e.expr.func.member == "apply" and isinstance(e.expr.func.expr, A.Name):
            return e.expr.func.expr.name, e.member, neg
        return None

    def _if(self, s: A.If, env: Env) -> Frag:
        hm = self._table_apply_of(s.cond)
        if hm is not None:
            tname, which, neg = hm
            sym = env.lookup(tname)
            if sym is None or sym.kind is not SymKind.TABLE:
                self.err(s.cond.pos, f"'{tname}' is not a table")
                return Frag(None, [])
            assert isinstance(sym.value, A.TableDecl)   # a TABLE symbol holds its declaration
            tj = self._apply(sym.value, s.cond.pos)
            if tj is None:
                return Frag(None, [])
            on_true = "__HIT__" if (which == "hit") != neg else "__MISS__"
            on_false = "__MISS__" if on_true == "__HIT__" else "__HIT__"
            tj["base_default_next"] = None
            nt: Json = {on_true: None, on_false: None}
            tj["next_tables"] = nt
            holes: list[Hole] = []
            for key, branch in ((on_true, s.then), (on_false, s.other)):
                f = self._stmt(branch, env.child()) if branch is not None else Frag(None, [])
                if f.entry is not None:
                    nt[key] = f.entry
                    holes += f.holes
                elif not f.terminal:
                    holes.append(self._set_key(nt, key))
            return Frag(self._entry(tj), holes)
        pre: list[Frag] = []
        cond_ast = s.cond
        if self._mentions_apply(s.cond):
            # As p4c: each t.apply().hit/miss inside a larger condition applies the table
            # first and records the outcome in a bool temporary the condition then reads.
            env = env.child()
            hoisted = self._hoist_applies(s.cond, env, pre)
            if hoisted is None:
                return Frag(None, [])
            cond_ast = hoisted
        frag = self._plain_if(s, cond_ast, env)
        return self._link(pre + [frag], False) if pre else frag

    def _hoist_applies(self, e: A.Expr, env: Env, pre: list[Frag],
                       always: bool = True) -> A.Expr | None:
        """Replace every ``t.apply().hit/miss`` in e by a fresh bool temporary (source order).
        Only applies that e always evaluates can move before it: one on the right of '&&' or
        '||' (or in a '?:' branch) must not run when the left side decides."""
        hm = self._table_apply_of(e)
        if hm is not None and not always:
            self.err(e.pos, "unsupported construct: table apply on the right of '&&'/'||' or in "
                            "a '?:' branch (it must not run when short-circuited); nest the ifs")
            return None
        if hm is not None and not (isinstance(e, A.Unary)):
            tname, which, _ = hm
            sym = env.lookup(tname)
            if sym is None or sym.kind is not SymKind.TABLE:
                self.err(e.pos, f"'{tname}' is not a table")
                return None
            assert isinstance(sym.value, A.TableDecl)   # a TABLE symbol holds its declaration
            tj = self._apply(sym.value, e.pos)
            if tj is None:
                return None
            tmp = self.ctx.layout.temp(Bool(), e.pos)
            name = f"${tmp.ref.field}"  # type: ignore[attr-defined]  # '$': no P4 name clashes
            env.add(Sym(SymKind.VAR, name, tmp))
            tj["base_default_next"] = None
            holes: list[Hole] = []
            nt: Json = {}
            for key, value in (("__HIT__", which == "hit"), ("__MISS__", which != "hit")):
                sj = self._set_flag(tmp, value, e.pos)
                nt[key] = sj["name"]
                holes.append(self._set_all(sj))
            tj["next_tables"] = nt
            pre.append(Frag(self._entry(tj), holes))
            return A.Name(e.pos, name)
        match e:
            case A.Unary(op=op, operand=x):
                inner = self._hoist_applies(x, env, pre, always)
                return A.Unary(e.pos, op, inner) if inner is not None else None
            case A.Binary(op=op, left=l, right=r):
                left = self._hoist_applies(l, env, pre, always)
                right = self._hoist_applies(r, env, pre, always and op not in ("&&", "||")) \
                    if left is not None else None
                return A.Binary(e.pos, op, left, right) if left and right else None
            case A.Ternary(cond=c, then=a, other=b):
                hc = self._hoist_applies(c, env, pre, always)
                ha = self._hoist_applies(a, env, pre, False)
                hb = self._hoist_applies(b, env, pre, False)
                if hc is None or ha is None or hb is None:
                    return None
                return A.Ternary(e.pos, hc, ha, hb)
        if self._mentions_apply(e):
            self.err(e.pos, "unsupported construct: this use of a table apply result")
            return None
        return e

    def _set_flag(self, tmp: TLoc, value: bool, pos: Pos) -> Json:
        """A hidden keyless table whose action sets a bool temporary (hit/miss outcome)."""
        base = hidden_action_base(pos.file, pos.line)
        aname = self.ctx.names.new(base)
        target = ref_json(tmp)
        act: Json = {"name": aname, "id": -1, "runtime_data": [], "primitives": [
            {"op": "assign", "parameters": [
                target,
                {"type": "expression", "value": {"type": "expression", "value": {
                    "op": "b2d", "left": None, "right": {"type": "bool", "value": value}}}}]}]}
        self.hidden.append((self.rank_base + len(self.order) + len(self.hidden) * 1e-3, act,
                            [], Env(None, self.ctx.g)))
        sj = self.tl.hidden_table(self.ctx.names.new(f"tbl_{aname}"), act)
        self._table_json(sj)
        for k in sj["next_tables"]:
            sj["next_tables"][k] = "$hole"
        return sj

    def _plain_if(self, s: A.If, cond_ast: A.Expr, env: Env) -> Frag:
        cond = self.ctx.typer.expr(cond_ast, env, Bool())
        if cond is None:
            return Frag(None, [])
        if not isinstance(cond.type, Bool):
            self.err(s.cond.pos, f"an if condition must be bool, got {show(cond.type)}")
            return Frag(None, [])
        if isinstance(cond, TConst):
            # A constant condition keeps only the branch it takes (p4c folds it away too,
            # with whatever the other branch alone would have used).
            taken = s.then if cond.value else s.other
            return self._stmt(taken, env.child()) if taken is not None else Frag(None, [])
        name = f"node_{self._new_node_name()}"
        cj: Json = {"name": name, "id": self.ps.cond_id, "expression": as_condition(cond),
                    "true_next": None, "false_next": None}
        self.ps.cond_id += 1
        self.conds.append(cj)
        holes = []
        for key, branch in (("true_next", s.then), ("false_next", s.other)):
            f = self._stmt(branch, env.child()) if branch is not None else Frag(None, [])
            if f.entry is not None:
                cj[key] = f.entry
                holes += f.holes
            elif not f.terminal:
                holes.append(self._set_key(cj, key))
        return Frag(name, holes)

    @staticmethod
    def _mentions_apply(e: A.Expr) -> bool:
        match e:
            case A.Call(func=A.Member(member="apply")):
                return True
            case A.Member(expr=x) | A.Unary(operand=x):
                return ControlLowering._mentions_apply(x)
            case A.Binary(left=l, right=r):
                return ControlLowering._mentions_apply(l) or ControlLowering._mentions_apply(r)
        return False

    @staticmethod
    def _value_switch_as_ifs(s: A.Switch) -> A.Stmt:
        """``switch (e) { 1: 2: {A} 3: {B} default: {C} }`` as
        ``if (e == 1 || e == 2) {A} else if (e == 3) {B} else {C}`` (labels without a body
        fall through to the next body)."""
        arms: list[tuple[list[A.Expr], A.Block]] = []
        default: A.Block | None = None
        pending: list[A.Expr] = []
        pending_default = False
        for c in s.cases:
            if c.value is None:
                pending_default = True
            else:
                pending.append(c.value)
            if c.body is None:
                continue
            if pending:
                arms.append((pending, c.body))
            if pending_default:
                default = c.body
            pending, pending_default = [], False
        stmt: A.Stmt | None = default
        for labels, body in reversed(arms):
            cond: A.Expr = A.Binary(labels[0].pos, "==", s.expr, labels[0])
            for lab in labels[1:]:
                cond = A.Binary(lab.pos, "||", cond, A.Binary(lab.pos, "==", s.expr, lab))
            stmt = A.If(s.pos, cond, body, stmt)
        return stmt if stmt is not None else A.EmptyStmt(s.pos)

    def _switch(self, s: A.Switch, env: Env) -> Frag:
        e = s.expr
        if not (isinstance(e, A.Member) and e.member == "action_run" and isinstance(e.expr, A.Call)
                and isinstance(e.expr.func, A.Member) and e.expr.func.member == "apply"
                and isinstance(e.expr.func.expr, A.Name)):
            if self._mentions_apply(e):
                self.err(e.pos, "unsupported construct: switch on this table apply result")
                return Frag(None, [])
            for c in s.cases:
                if c.value is not None:
                    lab = self.ctx.typer.expr(c.value, env)
                    if lab is not None and not isinstance(lab, TConst):
                        self.err(c.value.pos, "switch labels must be compile-time constants")
                        return Frag(None, [])
            return self._stmt(self._value_switch_as_ifs(s), env)
        sym = env.lookup(e.expr.func.expr.name)
        if sym is None or sym.kind is not SymKind.TABLE:
            self.err(e.pos, f"'{e.expr.func.expr.name}' is not a table")
            return Frag(None, [])
        table = sym.value
        assert isinstance(table, A.TableDecl)
        tj = self._apply(table, e.pos)
        if tj is None:
            return Frag(None, [])
        local_of = self.tl.last_local_names  # JSON action name per local action name
        nt: Json = tj["next_tables"]
        for k in nt:
            nt[k] = "$hole"
        holes: list[Hole] = [self._set_all(tj)]
        pending_labels: list[str | None] = []
        default_frag: Frag | None = None
        seen: set[str] = set()
        for case in s.cases:
            pending_labels.append(case.label)
            if case.label is not None:
                if case.label not in local_of:
                    self.err(case.pos, f"'{case.label}' is not an action of table "
                                       f"'{table.name}'")
                    continue
                if case.label in seen:
                    self.err(case.pos, f"duplicate switch label '{case.label}'")
                seen.add(case.label)
            if case.body is None:
                continue
            f = self._stmt(case.body, env.child())
            for lbl in pending_labels:
                if lbl is None:
                    default_frag = f
                    continue
                jname = local_of.get(lbl)
                if jname is None:
                    continue
                if f.entry is not None:
                    nt[jname] = f.entry
                elif f.terminal:
                    nt[jname] = None
            if f.entry is not None:
                holes += f.holes
            pending_labels = []
        if default_frag is not None:
            for k, v in nt.items():
                if v == "$hole" and k not in [local_of.get(x) for x in seen]:
                    if default_frag.entry is not None:
                        nt[k] = default_frag.entry
                    elif default_frag.terminal:
                        nt[k] = None
        return Frag(self._entry(tj), holes)
