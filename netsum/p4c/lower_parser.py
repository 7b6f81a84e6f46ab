"""Lower the parser (states, extract/set/verify/advance ops, select transitions), the
deparser (emit order) and the checksum controls (``checksums`` + ``calculations``).

Select keys and values are byte-padded concatenations of the key fields; a mask covering a
whole field means "exact" and p4c then writes ``mask: null``; ranges expand to value/mask
pairs.  An explicit ``transition reject`` compiles, as in p4c, to a final state (accept) with
a warning.
"""
from __future__ import annotations

from . import ast as A
from .blocks import BlockScope
from .calls import CallKind, resolve_call
from .diagnostics import Pos
from .exprjson import Json, as_condition, as_param, field_json, hexstr, lower_expr, ref_json, wrap
from .ir import (FieldRef, HeaderRef, StackFieldRef, StackRef, StructRef, TConst, TExpr, TLoc,
                 TLookahead, UnionStackNextRef, UnionStackRef)
from .layout import NameGen
from .lower_action import ActionLowering, LowerCtx, as_param_b2d
from .lower_ctx import prim
from .scopes import Env, SymKind, ValueSet
from .types import (Bits, Bool, ErrorT, EnumT, HeaderT, InfInt, P4Type, StackT, StructT,
                    VarbitT, show, width_of)
from .visit import flat

__all__ = ["lower_parser", "lower_deparser", "lower_checksums", "range_to_masks"]


def range_to_masks(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """Cover [lo, hi] with (value, mask) prefix pairs, lowest first."""
    out: list[tuple[int, int]] = []
    full = (1 << width) - 1
    while lo <= hi:
        size = 1
        while lo % (size * 2) == 0 and lo + size * 2 - 1 <= hi and size * 2 <= full + 1:
            size *= 2
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


def lower_parser(ctx: LowerCtx, scope: BlockScope) -> Json:
    decl = scope.decl
    assert isinstance(decl, A.ParserDecl)
    states: list[Json] = []
    names = {s.name for s in decl.states}
    if "start" not in names:
        ctx.diags.error(decl.pos, f"parser '{decl.name}' has no 'start' state")
    # MoveDeclarations made every variable a parser local and put parser-level
    # initializers where the parser starts.
    for i, st in enumerate(decl.states):
        env = scope.env.child()
        ops: list[Json] = []
        for s in st.stmts:
            _state_stmt(ctx, s, env, ops)
        key_json, transitions = _transition(ctx, st, env, names)
        states.append({"name": st.name, "id": i, "parser_ops": ops, "transitions": transitions,
                       "transition_key": key_json})
    return {"name": "parser", "id": 0, "init_state": "start", "parse_states": states}


def _state_stmt(ctx: LowerCtx, s: A.Stmt, env: Env, ops: list[Json]) -> None:
    typer = ctx.typer
    match s:
        case A.Block(stmts=ss):
            for x in ss:
                _state_stmt(ctx, x, env, ops)
        case A.EmptyStmt():
            pass
        case A.CallStmt(call=c):
            if _dynamic_validity(ctx, c, env, ops):
                return
            info = resolve_call(c, env, typer)
            if info is None:
                return
            if info.kind is CallKind.PACKET:
                _packet_op(ctx, info.name, info.args, info.type_args, c.pos, ops)
            elif info.kind is CallKind.FUNCTION and info.name == "verify":
                cond, errc = info.args
                assert cond is not None and errc is not None
                tmp = ctx.layout.temp(Bool(), c.pos)
                assert isinstance(tmp.ref, FieldRef)
                ops.append({"parameters": [field_json(tmp.ref), as_param_b2d(cond)],
                            "op": "set"})
                ops.append({"parameters": [wrap("d2b", None, field_json(tmp.ref)),
                                           lower_expr(errc)], "op": "verify"})
            elif info.kind is CallKind.HEADER and info.name in ("setValid", "setInvalid"):
                prims: list[Json] = []
                ActionLowering(ctx, "parser").call(info, env, prims, c.pos)
                for p in prims:
                    ops.append({"parameters": [p], "op": "primitive"})
            else:
                prims = []
                ActionLowering(ctx, "parser").call(info, env, prims, c.pos)
                for p in prims:
                    ops.append({"parameters": [p], "op": "primitive"})
        case A.Assign(lhs=l, rhs=r):
            _parser_assign(ctx, s, l, r, env, ops)
        case _:
            ctx.diags.error(s.pos, f"unsupported construct: {type(s).__name__} in a parser state")


def _dynamic_validity(ctx: LowerCtx, c: A.Call, env: Env, ops: list[Json]) -> bool:
    """`hs[i].setValid()` / `.setInvalid()` with a run-time i in a parser state: BMv2's
    add_header / remove_header on the element picked per packet (a dereference_header_stack
    operand, as p4c emits a run-time array index).  False when c is not that."""
    f = c.func
    if not (isinstance(f, A.Member) and f.member in ("setValid", "setInvalid") and
            not c.args and isinstance(f.expr, A.Index)):
        return False
    base = ctx.typer.expr(f.expr.expr, env)
    if not (isinstance(base, TLoc) and isinstance(base.ref, StackRef)):
        return False
    idx = ctx.typer.expr(f.expr.index, env)
    if idx is None or isinstance(idx, TConst):
        return False
    operand = {"type": "expression", "value": {
        "op": "dereference_header_stack",
        "left": {"type": "header_stack", "value": base.ref.name}, "right": as_param(idx)}}
    op = "add_header" if f.member == "setValid" else "remove_header"
    ops.append({"parameters": [prim(op, [operand])], "op": "primitive"})
    return True


def _lookahead_into(loc: TLoc, off: int, ops: list[Json]) -> int | None:
    """Parser ops setting loc from the packet bits at off onwards; the offset after it."""
    ref = loc.ref
    if isinstance(ref, FieldRef) and isinstance(loc.type, (Bits, Bool)):
        w = width_of(loc.type)
        ops.append({"parameters": [field_json(ref), {"type": "lookahead", "value": [off, w]}],
                    "op": "set"})
        return off + w
    if isinstance(ref, HeaderRef):
        ops.append({"parameters": [prim("add_header", [ref_json(loc)])], "op": "primitive"})
        for fname, ft in ref.type.fields:
            if not isinstance(ft, (Bits, Bool)):
                return None
            ops.append({"parameters": [field_json(FieldRef(ref.name, fname)), {
                "type": "lookahead", "value": [off, width_of(ft)]}], "op": "set"})
            off += width_of(ft)
        return off
    if isinstance(ref, StackRef):
        el = ref.type.elem
        for i in range(ref.type.size):
            got = _lookahead_into(TLoc(el, loc.pos, HeaderRef(f"{ref.name}[{i}]", el),
                                       loc.text), off, ops) if isinstance(el, HeaderT) else None
            if got is None:
                return None
            off = got
        return off
    if isinstance(ref, StructRef):
        for _, m in ref.members:
            got = _lookahead_into(m, off, ops)
            if got is None:
                return None
            off = got
        return off
    return None


def _parser_assign(ctx: LowerCtx, s: A.Stmt, l: A.Expr, r: A.Expr, env: Env,
                   ops: list[Json]) -> None:
    typer = ctx.typer
    lhs = typer.expr(l, env)
    if lhs is None:
        return
    rhs = typer.expr(r, env, lhs.type, lookahead_ok=True)
    if rhs is None:
        return
    if isinstance(rhs, TLookahead) and isinstance(rhs.type, (HeaderT, StructT)) and \
            isinstance(lhs, TLoc) and lhs.type == rhs.type:
        # x = pkt.lookahead<T>() for a header, or a struct of headers, stacks and bit strings:
        # every header becomes valid and each field is set from the packet bits at its offset
        # (p4c reads one bit<W> lookahead and slices it; the bits are the same).
        if _lookahead_into(lhs, rhs.offset, ops) is None:
            ctx.diags.error(s.pos, f"unsupported construct: lookahead into {show(lhs.type)}")
        return
    if isinstance(rhs, TLookahead):
        # pkt.lookahead<T>() or a field/slice of it: BMv2 sets the field from packet bits.
        if isinstance(lhs, TLoc) and isinstance(lhs.ref, FieldRef):
            if rhs.type != lhs.type:
                ctx.diags.error(s.pos, f"type mismatch in assignment: expected "
                                       f"{show(lhs.type)}, got {show(rhs.type)}")
                return
            ops.append({"parameters": [field_json(lhs.ref), {
                "type": "lookahead", "value": [rhs.offset, width_of(lhs.type)]}], "op": "set"})
        else:
            ctx.diags.error(s.pos, "unsupported construct: lookahead into this target")
        return
    if isinstance(lhs, TLoc) and isinstance(lhs.ref, FieldRef):
        c2 = typer.coerce(rhs, lhs.type, s.pos, "assignment")
        if c2 is not None:
            ops.append({"parameters": [field_json(lhs.ref), as_param(c2)], "op": "set"})
    elif isinstance(lhs, TLoc):
        prims: list[Json] = []
        ActionLowering(ctx, "parser").assign(lhs, rhs, s.pos, prims)
        for p in prims:
            ops.append({"parameters": [p], "op": "primitive"})
    else:
        ctx.diags.error(s.pos, "the left side of an assignment must be a writable location")


def _packet_op(ctx: LowerCtx, name: str, args: tuple[TExpr | None, ...],
               targs: tuple[object, ...], pos: Pos, ops: list[Json]) -> None:
    if name == "extract" and args and args[0] is None and len(targs) == 1 and \
            isinstance(targs[0], HeaderT) and _fixed_width(targs[0]):
        # extract<H>(_): the header's bits are skipped (bmv2's advance checks the length).
        ops.append({"parameters": [{"type": "hexstr", "value": hex(_bits(targs[0]))}],
                    "op": "advance"})
        return
    if name == "extract":
        hdr = args[0]
        # extract(h, bits): h's varbit field takes `bits` bits (BMv2 extract_VL).
        length = args[1] if len(args) > 1 else None
        op = "extract_VL" if length is not None else "extract"
        extra = [{"type": "expression", "value": lower_expr(length)}] if length is not None \
            else []
        elem_type = hdr.type.elem if hdr is not None and isinstance(hdr.type, StackT) \
            else hdr.type if hdr is not None else None
        has_varbit = isinstance(elem_type, HeaderT) and \
            any(isinstance(t, VarbitT) for _, t in elem_type.fields)
        if hdr is not None and isinstance(elem_type, HeaderT) and has_varbit != bool(extra):
            ctx.diags.error(pos, f"header {elem_type.name} " + (
                "has a varbit field: extract it with a length, extract(h, bits)" if has_varbit
                else "has no varbit field: extract(h) takes no length"))
            return
        if isinstance(hdr, TLoc) and isinstance(hdr.ref, StackRef):
            ops.append({"parameters": [{"type": "stack", "value": hdr.ref.name}] + extra,
                        "op": op})
        elif isinstance(hdr, TLoc) and isinstance(hdr.ref, UnionStackNextRef) and \
                hdr.ref.member:
            ops.append({"parameters": [{"type": "union_stack",
                                        "value": [hdr.ref.stack, hdr.ref.member]}] + extra,
                        "op": op})
        elif isinstance(hdr, TLoc) and isinstance(hdr.ref, HeaderRef):
            ops.append({"parameters": [{"type": "regular", "value": hdr.ref.name}] + extra,
                        "op": op})
        elif hdr is not None:
            ctx.diags.error(pos, f"extract needs a header, not {show(hdr.type)}")
    elif name == "advance":
        n = args[0]
        assert n is not None
        ops.append({"parameters": [as_param(n)], "op": "advance"})
    elif name == "emit":
        ctx.diags.error(pos, "packet_out.emit can only be used in the deparser")
    elif name == "lookahead" and len(targs) == 1 and isinstance(targs[0], P4Type) and \
            _fixed_width(targs[0]):
        # The value is dropped, but the packet must still hold the bits (PacketTooShort
        # otherwise): read them into a temporary, as the BMv2 `set` from lookahead does.
        w = _bits(targs[0])
        tmp = ctx.layout.temp(Bits(w), pos)
        assert isinstance(tmp.ref, FieldRef)
        ops.append({"parameters": [field_json(tmp.ref), {"type": "lookahead",
                                                         "value": [0, w]}], "op": "set"})
    else:
        ctx.diags.error(pos, f"unsupported construct: packet_in.{name} as a statement")


def _bits(t: P4Type) -> int:
    """Bits of a fixed-width type, a header's or struct's fields together."""
    if isinstance(t, (HeaderT, StructT)):
        return sum(_bits(ft) for _, ft in t.fields)
    return width_of(t)


def _fixed_width(t: P4Type) -> bool:
    if isinstance(t, (Bits, Bool)):
        return True
    if isinstance(t, (HeaderT, StructT)):
        return all(_fixed_width(ft) for _, ft in t.fields)
    return False


def _transition(ctx: LowerCtx, st: A.ParserState, env: Env,
                names: set[str]) -> tuple[list[Json], list[Json]]:
    def target(name: str, pos: Pos) -> str | None:
        if name == "accept":
            return None
        if name == "reject":
            ctx.diags.warning(pos, "explicit transition to reject is compiled as accept by "
                                   "BMv2 (the packet goes on with parser_error set)")
            return None
        if name not in names:
            ctx.diags.error(pos, f"unknown parser state '{name}'" +
                            _hint(name, names | {"accept", "reject"}))
        return name

    t = st.transition
    if t is None:
        ctx.diags.error(st.pos, f"parser state '{st.name}' has no transition")
        return [], []
    if isinstance(t, str):
        return [], [{"type": "default", "value": None, "mask": None,
                     "next_state": target(t, st.transition_pos)}]
    keys: list[TExpr] = []
    key_json: list[Json] = []
    for k in t.keys:
        te = ctx.typer.expr(k, env, lookahead_ok=True)
        if te is None:
            continue
        if isinstance(te, TLookahead):
            if not isinstance(te.type, Bits):
                # A select key is a bit/int/bool/enum/error value, never a whole header.
                ctx.diags.error(k.pos, f"unsupported construct: select key of type "
                                       f"{show(te.type)}")
                continue
            w = width_of(te.type)
            key_json.append({"type": "lookahead", "value": [te.offset, w]})
            keys.append(TConst(Bits(w), te.pos, 0))
        elif isinstance(te, TLoc) and isinstance(te.ref, (FieldRef, StackFieldRef)):
            key_json.append(ref_json(te))
            keys.append(te)
        elif isinstance(te.type, (Bits, Bool, ErrorT, EnumT)):
            key_json.append(as_param(te))
            keys.append(te)
        else:
            ctx.diags.error(k.pos, f"unsupported construct: select key of type {show(te.type)}")
    if len(keys) != len(t.keys):
        return key_json, []
    widths = [width_of(k.type) if not isinstance(k.type, InfInt) else 32 for k in keys]
    trans: list[Json] = []
    for case in t.cases:
        nxt = target(case.state, case.state_pos)
        ks = case.keyset
        if isinstance(ks, A.Default):
            trans.append({"type": "default", "value": None, "mask": None, "next_state": nxt})
            continue
        vs = env.lookup(ks.name) if isinstance(ks, A.Name) else None
        if vs is not None and vs.kind is SymKind.VALUE_SET:
            assert isinstance(vs.value, ValueSet)
            width = sum(w for _, w, _ in vs.value.fields)
            if width != sum(widths):
                ctx.diags.error(ks.pos, f"value set '{vs.name}' matches {width} bits; the "
                                        f"select keys have {sum(widths)}")
            trans.append({"type": "parse_vset", "value": vs.value.name, "mask": None,
                          "next_state": nxt})
            continue
        elems = ks.items if isinstance(ks, A.ListExpr) else (ks,)
        if len(elems) != len(keys):
            ctx.diags.error(ks.pos, f"select case has {len(elems)} value(s) but the select has "
                                    f"{len(keys)} key(s)")
            continue
        per_key: list[list[tuple[int, int]]] = []
        ok = True
        for e, key, w in zip(elems, keys, widths):
            choices = _keyset_values(ctx, e, key.type if isinstance(key.type, (Bits, Bool))
                                     else Bits(w), env, w)
            if choices is None:
                ok = False
                break
            per_key.append(choices)
        if not ok:
            continue
        combos: list[list[tuple[int, int]]] = [[]]
        for ch in per_key:
            combos = [c + [x] for c in combos for x in ch]
        for combo in combos:
            value = 0
            mask = 0
            all_exact = True
            for (v, m), w in zip(combo, widths):
                nb = (w + 7) // 8 * 8
                value = (value << nb) | v
                mask = (mask << nb) | m
                if m != (1 << w) - 1:
                    all_exact = False
            total = sum((w + 7) // 8 * 8 for w in widths)
            trans.append({"type": "hexstr", "value": hexstr(value, total)["value"],
                          "mask": None if all_exact else hexstr(mask, total)["value"],
                          "next_state": nxt})
    return key_json, trans


def _keyset_values(ctx: LowerCtx, e: A.Expr, t: Bits | Bool, env: Env,
                   w: int) -> list[tuple[int, int]] | None:
    full = (1 << w) - 1

    def const(x: A.Expr) -> int | None:
        te = ctx.typer.expr(x, env, t)
        if te is None:
            return None
        if not isinstance(te, TConst):
            ctx.diags.error(x.pos, "select case values must be compile-time constants")
            return None
        if isinstance(t, Bool):
            if not isinstance(te.type, Bool):
                ctx.diags.error(x.pos, f"type mismatch in select case: expected bool, got "
                                       f"{show(te.type)}")
                return None
            return int(bool(te.value))
        if te.type != t and not isinstance(te.type, (ErrorT, EnumT)):
            c = ctx.typer.coerce(te, t, x.pos, "select case")
            if not isinstance(c, TConst):   # None after an error; a TConst stays a TConst
                return None
            te = c
        return int(te.value) & full

    if isinstance(e, A.Default):
        return [(0, 0)]
    if isinstance(e, A.Mask):
        v, m = const(e.value), const(e.mask)
        return None if v is None or m is None else [(v & m, m)]
    if isinstance(e, A.Range):
        lo, hi = const(e.lo), const(e.hi)
        if lo is None or hi is None:
            return None
        if lo > hi:
            ctx.diags.error(e.pos, f"empty range {lo}..{hi}")
            return None
        return range_to_masks(lo, hi, w)
    v = const(e)
    return None if v is None else [(v, full)]


def _hint(name: str, names: set[str]) -> str:
    from .diagnostics import suggest
    s = suggest(name, names)
    return f".{s}" if s else ""


def lower_deparser(ctx: LowerCtx, scope: BlockScope) -> Json:
    decl = scope.decl
    assert isinstance(decl, A.ControlDecl)
    order: list[str] = []

    def emit_loc(loc: TLoc, pos: Pos) -> None:
        ref = loc.ref
        if isinstance(ref, HeaderRef):
            order.append(ref.name)
        elif isinstance(ref, StackRef):
            order.extend(f"{ref.name}[{i}]" for i in range(ref.type.size))
        elif isinstance(ref, UnionStackRef):
            for u in ref.unions:
                emit_loc(u, pos)
        elif hasattr(ref, "members"):
            for _, m in ref.members:
                emit_loc(m, pos)
        else:
            ctx.diags.error(pos, f"emit needs a header or a struct of headers, not "
                                 f"{show(loc.type)}")

    for s in flat(decl.apply.stmts):
        if isinstance(s, A.CallStmt):
            info = resolve_call(s.call, scope.env, ctx.typer)
            if info is None:
                continue
            if info.kind is CallKind.PACKET and info.name == "emit":
                a = info.args[0]
                if isinstance(a, TLoc):
                    emit_loc(a, s.pos)
                continue
        ctx.diags.error(s.pos, "unsupported construct: only packet.emit(...) calls are "
                               "supported in the deparser")
    return {"name": "deparser", "id": 0, "order": order, "primitives": []}


def lower_checksums(ctx: LowerCtx, scope: BlockScope, verify: bool,
                    names: NameGen) -> list[Json]:
    decl = scope.decl
    assert isinstance(decl, A.ControlDecl)
    out: list[Json] = []
    want = "verify_checksum" if verify else "update_checksum"

    for s in flat(decl.apply.stmts):
        if isinstance(s, A.CallStmt):
            info = resolve_call(s.call, scope.env, ctx.typer)
            if info is None:
                continue
            if info.kind is CallKind.FUNCTION and info.name in (want, want + "_with_payload"):
                ctx.extern_functions = True
                cond, data, target, algo = info.args
                if not (isinstance(target, TLoc) and isinstance(target.ref, FieldRef)):
                    ctx.diags.error(s.pos, "the checksum must be a header field")
                    continue
                if not isinstance(algo, TConst) or not isinstance(algo.type, EnumT):
                    ctx.diags.error(s.pos, "the algorithm must be a HashAlgorithm constant")
                    continue
                inputs = ActionLowering(ctx, scope.role).calc_inputs(data, s.pos)
                if inputs is None:
                    continue
                algo_name = algo.type.members[int(algo.value)]
                calc = ctx.calculation(algo_name, inputs)
                cj: Json = {"name": names.new("cksum"), "id": -1,
                            "target": [target.ref.header, target.ref.field],
                            "type": "generic", "calculation": calc, "verify": verify,
                            "update": not verify}
                if info.name.endswith("_with_payload"):
                    cj["type"] = "generic"
                    ctx.calculations[-1]["input"].append({"type": "payload", "value": None})
                assert cond is not None
                if not (isinstance(cond, TConst) and cond.value is True):
                    cj["if_cond"] = as_condition(cond)
                else:
                    cj["if_cond"] = None
                out.append(cj)
                continue
            role = "verify checksum" if verify else "compute checksum"
            ctx.diags.error(s.pos, f"v1model: only {want}() calls are supported in the "
                                   f"{role} control")
            continue
        if isinstance(s, A.EmptyStmt):
            continue
        ctx.diags.error(s.pos, f"unsupported construct: {type(s).__name__} in a checksum "
                               "control (only verify_checksum/update_checksum calls)")
    return out
