"""Lower action bodies (and synthesized statement groups) to BMv2 primitives.

Owns: assignments (field, header, struct, slice), v1model extern calls as primitives
(register_read/write, count, execute_meter, modify_field_rng_uniform,
modify_field_with_hash_based_offset, mark_to_drop, clone*, resubmit, recirculate, truncate),
header validity, inlining of action calls (copy-in to temporaries), and ``if``/``return``/
``exit`` inside an action as ``_jump_if_zero``/``_jump`` with absolute targets (p4c ≥ 2024-11).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ast as A
from .calls import CallInfo, CallKind, resolve_call
from .diagnostics import Diagnostics, Pos
from .exprjson import Json, as_param, field_json, hexstr, lower_expr, ref_json, to_data, wrap
from .ir import (FieldRef, HeaderRef, ParamRef, StructRef, TConst, TExpr, TIsValid, TList, TLoc,
                 TSlice, TString)
from .layout import Layout, NameGen
from .resolve import ConstValue, Globals, resolve_type
from .scopes import Env, ExternInstance, Sym, SymKind
from .typecheck import Typer
from .types import Bits, Bool, EnumT, HeaderT, StructT, show

__all__ = ["LowerCtx", "ActionLowering", "HASH_ALGOS"]

HASH_ALGOS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16",
              "xor16")


@dataclass
class LowerCtx:
    """State shared by all lowering steps of one program (no globals: passed explicitly)."""

    g: Globals
    layout: Layout
    typer: Typer
    diags: Diagnostics
    calculations: list[Json] = field(default_factory=list)
    field_lists: list[Json] = field(default_factory=list)
    learn_lists: list[Json] = field(default_factory=list)
    digests: dict[str, StructT] = field(default_factory=dict)  # learn list name -> data type
    direct_meter_targets: dict[str, FieldRef] = field(default_factory=dict)
    names: NameGen = field(default_factory=NameGen)

    def calculation(self, algo: str, inputs: list[Json]) -> str:
        name = f"calc_{len(self.calculations)}"
        self.calculations.append({"name": name, "id": len(self.calculations), "algo": algo,
                                  "input": inputs})
        return name

    def learn_list(self, name: str, elements: list[Json]) -> int:
        lid = len(self.learn_lists) + 1
        self.learn_lists.append({"id": lid, "name": name, "elements": elements})
        return lid

    def field_list(self, base: str, elements: list[Json]) -> int:
        fid = len(self.field_lists) + 1
        self.field_lists.append({"id": fid, "name": self.names.new(base), "elements": elements})
        return fid


def _prim(op: str, params: list[Json], pos: Pos | None = None) -> Json:
    p: dict[str, Any] = {"op": op, "parameters": params}
    return p


class ActionLowering:
    """Statements → primitive list for one action body (``block`` is the control's role)."""

    def __init__(self, ctx: LowerCtx, role: str) -> None:
        self.ctx = ctx
        self.role = role
        self.typer = ctx.typer
        # Straight-line knowledge "field == expression" for p4c-style copy propagation into
        # extern arguments; forgotten conservatively on any write it depends on and at joins.
        self.known: dict[FieldRef, TExpr] = {}

    def _forget(self, ref: FieldRef | None) -> None:
        if ref is None:
            self.known.clear()
            return
        self.known.pop(ref, None)
        for k in [k for k, v in self.known.items() if ref in _reads(v)]:
            del self.known[k]

    def err(self, pos: Pos, msg: str) -> None:
        self.ctx.diags.error(pos, msg)

    def lower_body(self, stmts: tuple[A.Stmt, ...], env: Env) -> list[Json]:
        prims: list[Json] = []
        returns: list[int] = []
        self._stmts(stmts, env, prims, returns)
        self._patch(prims, returns, len(prims))
        self.trim_tail_jumps(prims)
        return prims

    @staticmethod
    def trim_tail_jumps(prims: list[Json]) -> None:
        """Drop a final ``_jump`` to the end (a trailing return/exit) and retarget jumps that
        pointed past the new end, so no primitive jumps to its immediate successor at the end."""
        changed = False
        while prims and prims[-1]["op"] == "_jump" and \
                int(prims[-1]["parameters"][0]["value"], 16) == len(prims):
            prims.pop()
            changed = True
        if changed:
            end = len(prims)
            for p in prims:
                if p["op"] in ("_jump", "_jump_if_zero"):
                    t = p["parameters"][-1]
                    if int(t["value"], 16) > end:
                        p["parameters"][-1] = hexstr(end)

    @staticmethod
    def _patch(prims: list[Json], jumps: list[int], target: int) -> None:
        for i in jumps:
            prims[i]["parameters"][-1] = hexstr(target)

    def _stmts(self, stmts: tuple[A.Stmt, ...], env: Env, prims: list[Json],
               returns: list[int]) -> None:
        for s in stmts:
            self._stmt(s, env, prims, returns)

    def _stmt(self, s: A.Stmt, env: Env, prims: list[Json], returns: list[int]) -> None:
        typer = self.typer
        match s:
            case A.Block(stmts=ss):
                self._stmts(ss, env.child(), prims, returns)
            case A.EmptyStmt():
                pass
            case A.VarDecl(type=t, name=n, init=init):
                tt = resolve_type(t, env.g, self.ctx.diags)
                if tt is None:
                    return
                loc = self.ctx.layout.alloc_local(n, tt, s.pos, key=s)
                env.add(Sym(SymKind.VAR, n, loc))
                if init is not None:
                    rhs = typer.expr(init, env, tt)
                    if rhs is not None:
                        self.assign(loc, rhs, s.pos, prims)
            case A.Assign(lhs=l, rhs=r):
                lhs = typer.expr(l, env)
                if lhs is None:
                    typer.expr(r, env)
                    return
                if isinstance(lhs, TSlice):
                    rhs = typer.expr(r, env, lhs.type)
                    if rhs is not None:
                        self._assign_slice(lhs, rhs, s.pos, prims)
                    return
                if not isinstance(lhs, TLoc) or isinstance(lhs.ref, ParamRef):
                    self.err(l.pos, "the left side of an assignment must be a writable location")
                    return
                rhs = typer.expr(r, env, lhs.type)
                if rhs is not None:
                    self.assign(lhs, rhs, s.pos, prims)
            case A.CallStmt(call=c):
                info = resolve_call(c, env, typer)
                if info is not None:
                    self.call(info, env, prims, s.pos)
            case A.If(cond=c, then=t, other=o):
                cond = typer.expr(c, env, Bool())
                if cond is None:
                    return
                if not isinstance(cond.type, Bool):
                    self.err(c.pos, f"an if condition must be bool, got {show(cond.type)}")
                    return
                if isinstance(cond, TConst):
                    branch = t if cond.value else o
                    if branch is not None:
                        self._stmt(branch, env.child(), prims, returns)
                    return
                jz = len(prims)
                prims.append(_prim("_jump_if_zero",
                                   [as_param_b2d(cond), hexstr(0)]))
                self._forget(None)
                self._stmt(t, env.child(), prims, returns)
                self._forget(None)
                if o is not None:
                    j = len(prims)
                    prims.append(_prim("_jump", [hexstr(0)]))
                    self._patch(prims, [jz], len(prims))
                    self._stmt(o, env.child(), prims, returns)
                    self._forget(None)
                    self._patch(prims, [j], len(prims))
                else:
                    self._patch(prims, [jz], len(prims))
            case A.Return(value=v):
                if v is not None:
                    self.err(s.pos, "an action cannot return a value")
                returns.append(len(prims))
                prims.append(_prim("_jump", [hexstr(0)]))
            case A.Exit():
                prims.append(_prim("exit", []))
                returns.append(len(prims))
                prims.append(_prim("_jump", [hexstr(0)]))
            case A.Switch():
                self.err(s.pos, "unsupported construct: switch statement inside an action")
            case _:
                self.err(s.pos, f"unsupported construct: {type(s).__name__} in an action")

    # ------------------------------------------------------------ assignments
    def assign(self, lhs: TLoc, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        t = lhs.type
        if not isinstance(lhs.ref, FieldRef):
            self._forget(None)
        if isinstance(t, HeaderT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, HeaderRef) and rhs.type == t:
                prims.append(_prim("assign_header", [ref_json(lhs), ref_json(rhs)]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to header "
                              f"{show(t)}")
            return
        if isinstance(t, StructT):
            if isinstance(lhs.ref, StructRef) and isinstance(rhs, TLoc) and \
                    isinstance(rhs.ref, StructRef) and rhs.type == t:
                for (n, l), (_, r) in zip(lhs.ref.members, rhs.ref.members):
                    self.assign(l, r, pos, prims)
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to struct "
                              f"{show(t)}")
            return
        c = self.typer.coerce(rhs, t, pos, "assignment")
        if c is None:
            return
        prims.append(_prim("assign", [ref_json(lhs), as_param(c)]))
        if isinstance(lhs.ref, FieldRef):
            self._forget(lhs.ref)
            if lhs.ref not in _reads(c):
                self.known[lhs.ref] = c

    def _assign_slice(self, lhs: TSlice, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        base = lhs.operand
        if not isinstance(base, TLoc) or not isinstance(base.ref, FieldRef):
            self.err(pos, "the left side of an assignment must be a writable location")
            return
        rhs2 = self.typer.coerce(rhs, lhs.type, pos, "assignment")
        if rhs2 is None:
            return
        t = base.type
        assert isinstance(t, Bits)
        w = t.width
        m = ((1 << (lhs.hi - lhs.lo + 1)) - 1) << lhs.lo
        keep = wrap("&", field_json(base.ref), hexstr(((1 << w) - 1) ^ m, w))
        new = wrap("&", wrap("<<", lower_expr(rhs2), hexstr(lhs.lo)), hexstr(m, w))
        prims.append(_prim("assign", [field_json(base.ref),
                                      {"type": "expression", "value": wrap("|", keep, new)}]))
        self._forget(base.ref)

    # ------------------------------------------------------------ calls
    def simple_arg(self, te: TExpr, prims: list[Json]) -> TExpr:
        """An extern's ``in`` argument as p4c leaves it: p4c copies it into a temporary and
        then propagates copies, so a field whose value is known becomes that constant or
        field, a known computed value or a computed argument goes through a temporary."""
        if isinstance(te, TLoc) and isinstance(te.ref, FieldRef) and te.ref in self.known:
            k = self.known[te.ref]
            if isinstance(k, TConst):
                return TConst(te.type, te.pos, k.value)
            if isinstance(k, TLoc) and not isinstance(k.type, HeaderT):
                return k
            te = k
        if isinstance(te, (TConst, TLoc)):
            return te
        tmp = self.ctx.layout.temp(te.type, te.pos)
        self.assign(tmp, te, te.pos, prims)
        return tmp

    def _wrote(self, dst: TExpr | None) -> None:
        """An extern wrote ``dst``: what was known about it is stale."""
        if isinstance(dst, TLoc) and isinstance(dst.ref, FieldRef):
            self._forget(dst.ref)
        else:
            self._forget(None)

    def call(self, info: CallInfo, env: Env, prims: list[Json], pos: Pos) -> None:
        k = info.kind
        if k is CallKind.ACTION:
            self.inline(info, env, prims)
        elif k is CallKind.HEADER:
            hdr = info.target
            assert isinstance(hdr, TLoc)
            if info.name == "isValid":
                return
            op = "add_header" if info.name == "setValid" else "remove_header"
            prims.append(_prim(op, [ref_json(hdr)]))
            self._forget(None)  # validity changed (and BMv2 zeroes a header it adds)
        elif k is CallKind.STACK:
            st = info.target
            assert isinstance(st, TLoc)
            n = info.args[0]
            assert isinstance(n, TConst)
            op = "push" if info.name == "push_front" else "pop"
            prims.append(_prim(op, [ref_json(st), hexstr(int(n.value))]))
            self._forget(None)
        elif k is CallKind.METHOD:
            self._method(info, prims)
        elif k is CallKind.FUNCTION:
            self._function(info, env, prims)
        elif k is CallKind.APPLY:
            self.err(info.pos, "a table cannot be applied inside an action")
        elif k is CallKind.PACKET:
            self.err(info.pos, f"packet method '{info.name}' can only be used in a "
                               f"{'deparser' if info.name == 'emit' else 'parser'}")

    def inline(self, info: CallInfo, env: Env, prims: list[Json]) -> None:
        decl = info.target
        assert isinstance(decl, A.ActionDecl)
        # The callee sees the scope it was declared in: its block, or only globals.
        if env.g.actions.get(decl.name) is decl:
            callee = Env(None, env.g, env.block)
        else:
            callee = self._control_env(env).child()
        for p, a in zip(info.params, info.args):
            if a is None:
                continue
            if p.direction in ("out", "inout"):
                assert isinstance(a, TLoc)
                callee.add(Sym(SymKind.VAR, p.name, a))
            elif isinstance(a, TConst):
                callee.add(Sym(SymKind.CONST, p.name, ConstValue(a.type, a.value)))
            elif isinstance(a, TLoc) and isinstance(a.ref, ParamRef):
                callee.add(Sym(SymKind.VAR, p.name, a))
            else:
                tmp = self.ctx.layout.temp(a.type, a.pos)
                self.assign(tmp, a, a.pos, prims)
                callee.add(Sym(SymKind.VAR, p.name, tmp))
        returns: list[int] = []
        self._stmts(decl.body.stmts, callee, prims, returns)
        self._patch(prims, returns, len(prims))

    @staticmethod
    def _control_env(env: Env) -> Env:
        """The block-level env (parameters, locals), where an action's body is declared."""
        e = env
        while e.parent is not None:
            e = e.parent
        return e

    def _method(self, info: CallInfo, prims: list[Json]) -> None:
        inst = info.target
        assert isinstance(inst, ExternInstance)
        a = info.args
        ext, m = inst.extern, info.name
        if self.role == "parser" and ext in ("register", "counter", "meter", "direct_counter",
                                             "direct_meter"):
            self.err(info.pos, f"v1model: {ext} method '{m}' cannot be called in a parser")
            return
        if self.role in ("verify_checksum", "compute_checksum", "deparser"):
            self.err(info.pos, f"v1model: {ext} method '{m}' cannot be called in the "
                               f"{self.role.replace('_', ' ')} control")
            return
        if ext == "register" and m == "read" and len(a) == 2:
            dst, idx = a
            assert dst is not None and idx is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("register_read", [as_param(dst), _arr("register_array", inst),
                                                 as_param(idx)]))
            self._wrote(dst)
        elif ext == "register" and m == "write":
            idx, val = a
            assert idx is not None and val is not None
            idx = self.simple_arg(idx, prims)
            val = self.simple_arg(val, prims)
            prims.append(_prim("register_write", [_arr("register_array", inst), as_param(idx),
                                                  as_param(val)]))
        elif ext == "counter" and m == "count":
            idx = a[0]
            assert idx is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("count", [_arr("counter_array", inst), as_param(idx)]))
        elif ext == "meter" and m == "execute_meter":
            idx, dst = a
            assert idx is not None and dst is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("execute_meter", [_arr("meter_array", inst), as_param(idx),
                                                 as_param(dst)]))
            self._wrote(dst)
        elif ext == "direct_counter" and m == "count":
            pass  # BMv2 counts direct counters itself when the table hits
        elif ext == "direct_meter" and m == "read":
            dst = a[0]
            if isinstance(dst, TLoc) and isinstance(dst.ref, FieldRef):
                prev = self.ctx.direct_meter_targets.get(inst.name)
                if prev is not None and prev != dst.ref:
                    self.err(info.pos, f"direct_meter '{inst.name}' is read into two different "
                                       "fields; BMv2 supports one result field per meter")
                self.ctx.direct_meter_targets[inst.name] = dst.ref
        else:
            self.err(info.pos, f"unsupported construct: {ext}.{m} with {len(a)} argument(s)")

    def _function(self, info: CallInfo, env: Env, prims: list[Json]) -> None:
        n, a = info.name, info.args
        role = self.role
        if n in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                 "update_checksum_with_payload"):
            want = "verify_checksum" if n.startswith("verify") else "compute_checksum"
            self.err(info.pos, f"v1model: {n} can only be called in the "
                               f"{want.replace('_', ' ')} control")
            return
        if n == "verify":
            self.err(info.pos, "verify() can only be called in a parser")
            return
        if role == "parser" and n not in ("verify",):
            self.err(info.pos, f"v1model: {n}() cannot be called in a parser")
            return
        if role in ("verify_checksum", "compute_checksum", "deparser"):
            self.err(info.pos, f"v1model: {n}() cannot be called in the "
                               f"{role.replace('_', ' ')} control")
            return
        if n == "mark_to_drop":
            prims.append(_prim("mark_to_drop", [{"type": "header", "value": "standard_metadata"}]))
        elif n == "random":
            dst, lo, hi = a
            assert dst is not None and lo is not None and hi is not None
            lo, hi = self.simple_arg(lo, prims), self.simple_arg(hi, prims)
            prims.append(_prim("modify_field_rng_uniform", [as_param(dst), as_param(lo),
                                                            as_param(hi)]))
            self._wrote(dst)
        elif n == "hash":
            self._hash(info, prims)
        elif n in ("clone", "clone_preserving_field_list"):
            ctype, session = a[0], a[1]
            assert isinstance(ctype, TConst) and session is not None
            op = "clone_ingress_pkt_to_egress" if int(ctype.value) == 0 \
                else "clone_egress_pkt_to_egress"
            if n == "clone":
                fid = self.ctx.field_list("fl", [])
            else:
                fid = self._preserved_list(a[2], info.pos)
                if fid is None:
                    return
            session = self.simple_arg(session, prims)
            prims.append(_prim(op, [as_param(session), hexstr(fid)]))
        elif n in ("resubmit", "recirculate", "clone3"):
            data = a[-1]
            elements = self._data_fields(data, info.pos)
            if elements is None:
                return
            fid = self.ctx.field_list("fl", elements)
            if n == "clone3":
                ctype, session = a[0], a[1]
                assert isinstance(ctype, TConst) and session is not None
                op = "clone_ingress_pkt_to_egress" if int(ctype.value) == 0 \
                    else "clone_egress_pkt_to_egress"
                session = self.simple_arg(session, prims)
                prims.append(_prim(op, [as_param(session), hexstr(fid)]))
            else:
                prims.append(_prim(n, [hexstr(fid)]))
        elif n in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            fid = self._preserved_list(a[0], info.pos)
            if fid is not None:
                prims.append(_prim(n.split("_")[0], [hexstr(fid)]))
        elif n == "truncate":
            ln = a[0]
            assert ln is not None
            prims.append(_prim("truncate", [as_param(ln)]))
        elif n in ("assert", "assume"):
            c = a[0]
            assert c is not None
            prims.append(_prim(n, [as_param_b2d(c)]))
        elif n == "digest":
            self._digest(info, prims)
        elif n == "log_msg":
            msg = a[0]
            assert isinstance(msg, TString)
            values: list[Json] = []
            data = a[1] if len(a) > 1 else None
            for it in (data.items if isinstance(data, TList) else (data,) if data else ()):
                values.append(to_data(it))
            prims.append(_prim("log_msg", [{"type": "string", "value": msg.value},
                                           {"type": "parameters_vector", "value": values}]))
        else:
            self.err(info.pos, f"unsupported construct: extern function '{n}'")

    def _digest(self, info: CallInfo, prims: list[Json]) -> None:
        receiver, data = info.args
        assert receiver is not None and data is not None
        st = info.type_args[0] if info.type_args else data.type
        if not isinstance(st, StructT):
            self.err(info.pos, "digest data must be a struct (or a list with digest<T> naming "
                               "the struct type)")
            return
        items: list[TExpr] = []
        if isinstance(data, TList):
            items = list(data.items)
        elif isinstance(data, TLoc) and isinstance(data.ref, StructRef):
            items = [m for _, m in data.ref.members]
        for it in items:
            if not isinstance(it.type, (Bits, Bool)):
                self.err(it.pos, f"unsupported construct: digest field of type {show(it.type)}")
                return
        # Values that are not fields go through temporaries (BMv2 learn lists name fields).
        elements: list[Json] = []
        for it in items:
            if isinstance(it, TLoc) and isinstance(it.ref, FieldRef):
                elements.append(field_json(it.ref))
                continue
            tmp = self.ctx.layout.temp(it.type, it.pos)
            self.assign(tmp, it, it.pos, prims)
            assert isinstance(tmp.ref, FieldRef)
            elements.append(field_json(tmp.ref))
        # One learn list per digest type and field set; P4Info has one digest per type.
        lid = next((ll["id"] for ll in self.ctx.learn_lists
                    if ll["name"] == st.name and ll["elements"] == elements), None)
        if lid is None:
            lid = self.ctx.learn_list(st.name, elements)
            self.ctx.digests[st.name] = st
        prims.append(_prim("generate_digest", [as_param(receiver), hexstr(lid)]))

    def _data_fields(self, data: TExpr | None, pos: Pos) -> list[Json] | None:
        """Fields of a list or struct argument (deprecated resubmit/recirculate/clone3)."""
        out: list[Json] = []

        def add(te: TExpr) -> bool:
            if isinstance(te, TLoc) and isinstance(te.ref, FieldRef):
                out.append(field_json(te.ref))
                return True
            if isinstance(te, TLoc) and isinstance(te.ref, StructRef):
                return all(add(m) for _, m in te.ref.members)
            if isinstance(te, TList):
                return all(add(i) for i in te.items)
            self.err(te.pos, "the preserved data must be metadata fields or structs of them")
            return False

        if data is not None and not add(data):
            return None
        return out

    def _preserved_list(self, idx: TExpr | None, pos: Pos) -> int | None:
        if not isinstance(idx, TConst):
            self.err(pos, "the field list index must be a compile-time constant")
            return None
        want = int(idx.value)
        elements: list[Json] = []
        meta = self.ctx.layout.meta_loc
        if meta is not None and isinstance(meta.ref, StructRef):
            for fname, loc in meta.ref.members:
                annos = self.ctx.g.field_annotations.get((meta.type.name, fname), ())  # type: ignore[attr-defined]
                for an in annos:
                    if an.name == "field_list" and any(
                            isinstance(x, A.IntLit) and x.value == want for x in an.args):
                        if isinstance(loc.ref, FieldRef):
                            elements.append(field_json(loc.ref))
        return self.ctx.field_list(f"field_list{want}", elements)

    def _hash(self, info: CallInfo, prims: list[Json]) -> None:
        dst, algo, base, data, mx = info.args
        assert dst is not None and algo is not None and base is not None and mx is not None
        if not isinstance(algo, TConst) or not isinstance(algo.type, EnumT):
            self.err(info.pos, "the hash algorithm must be a HashAlgorithm constant")
            return
        name = algo.type.members[int(algo.value)]
        inputs = self.calc_inputs(data, info.pos, prims)
        if inputs is None:
            return
        calc = self.ctx.calculation(name, inputs)
        base, mx = self.simple_arg(base, prims), self.simple_arg(mx, prims)
        prims.append(_prim("modify_field_with_hash_based_offset",
                           [as_param(dst), as_param(base), {"type": "calculation", "value": calc},
                            as_param(mx)]))
        self._wrote(dst)

    def calc_inputs(self, data: TExpr | None, pos: Pos,
                    prims: list[Json] | None = None) -> list[Json] | None:
        """Fields a calculation reads; with ``prims``, other values go through temporaries."""
        items: tuple[TExpr, ...]
        if isinstance(data, TList):
            items = data.items
        elif data is not None:
            items = (data,)
        else:
            return []
        out: list[Json] = []
        for it in items:
            if prims is not None and isinstance(it.type, Bits) and not isinstance(it, TConst):
                # In an action p4c materializes the data list into temporaries first.
                tmp = self.ctx.layout.temp(it.type, it.pos)
                self.assign(tmp, it, it.pos, prims)
                assert isinstance(tmp.ref, FieldRef)
                out.append(field_json(tmp.ref))
            elif isinstance(it, TLoc) and isinstance(it.ref, FieldRef):
                out.append(field_json(it.ref))
            elif isinstance(it, TLoc) and isinstance(it.ref, HeaderRef):
                for fname, _ in it.ref.type.fields:
                    out.append({"type": "field", "value": [it.ref.name, fname]})
            elif isinstance(it, TConst) and isinstance(it.type, Bits):
                out.append({**hexstr(int(it.value), it.type.width), "bitwidth": it.type.width})
            else:
                self.err(it.pos, "unsupported construct: hash/checksum input must be a field, "
                                 "a header or a constant of known width")
                return None
        return out


def _reads(te: TExpr) -> set[FieldRef]:
    """Every field (and header validity bit) an expression reads."""
    out: set[FieldRef] = set()
    stack: list[object] = [te]
    while stack:
        x = stack.pop()
        if isinstance(x, TLoc) and isinstance(x.ref, FieldRef):
            out.add(x.ref)
        elif isinstance(x, TIsValid):
            out.add(FieldRef(x.header, "$valid$"))
        elif isinstance(x, TExpr):
            for name in x.__dataclass_fields__:
                v = getattr(x, name)
                if isinstance(v, TExpr):
                    stack.append(v)
                elif isinstance(v, tuple):
                    stack.extend(i for i in v if isinstance(i, TExpr))
    return out


def _arr(kind: str, inst: ExternInstance) -> Json:
    return {"type": kind, "value": inst.name}


def as_param_b2d(cond: TExpr) -> Json:
    """A bool condition as a data primitive parameter: b2d(cond), wrapped twice."""
    return {"type": "expression", "value": wrap("b2d", None, lower_expr(cond))}


_ = (to_data,)
