"""The type check, expression half (the Typer the lowering calls on every expression it
lowers): AST expressions → typed IR (:mod:`ir`), with P4's width rules.

Integer literals without a width have type ``int`` until an operand, an assignment target or a
parameter gives them one (spec §8.9); constant sub-expressions fold.  Mismatched widths are
errors (an explicit cast is required), never silent truncation.
"""
from __future__ import annotations

from . import ast as A
from .diagnostics import Diagnostics, NOPOS, Pos, unknown
from .ir import (FieldRef, HeaderRef, StackFieldRef, StackLastRef, StackRef,
                 StructRef, TBinary, TCast, TConcat, TLastIndex, TUnionValid, UnionRef,
                 UnionStackNextRef,
                 UnionStackRef,
                 TConst, TExpr, TIsValid, TList, TLoc, TLookahead, TSlice, TString, TTernary,
                 TUnary)
from .layout import Layout
from .resolve import ConstValue, fold_binary
from .scopes import Env, Sym, SymKind
from .types import (Bits, Bool, EnumT, ErrorT, HeaderT, InfInt, P4Type, StackT, Str, StructT,
                    UnionT, lookahead_width, show, width_of)

__all__ = ["Typer", "expr_text", "key_name"]

_ARITH = ("+", "-", "*", "/", "%", "&", "|", "^", "|+|", "|-|")
_COMPARE = ("==", "!=", "<", ">", "<=", ">=")


_PARSER_ONLY_STACK_MEMBERS = ("next", "last", "lastIndex")


def expr_text(e: A.Expr) -> str:
    """p4c-like source spelling of an expression (used for key names and messages)."""
    match e:
        case A.Name(name=n, top_level=t, orig=o):
            return ("." if t else "") + (o or n)
        case A.Member(expr=x, member=m):
            return f"{expr_text(x)}.{m}"
        case A.Index(expr=x, index=i):
            return f"{expr_text(x)}[{expr_text(i)}]"
        case A.Slice(expr=x, hi=h, lo=l):
            return f"{expr_text(x)}[{expr_text(h)}:{expr_text(l)}]"
        case A.IntLit(text=t):
            return t
        case A.BoolLit(value=v):
            return "true" if v else "false"
        case A.Call(func=f, args=args):
            shown = ", ".join(expr_text(a.value) if a.value else "_" for a in args)
            return f"{expr_text(f)}({shown})"
        case A.Unary(op=op, operand=x):
            return f"{op}{expr_text(x)}"
        case A.Binary(op=op, left=l, right=r):
            return f"{expr_text(l)} {op} {expr_text(r)}"
        case A.Cast(expr=x):
            return f"(cast){expr_text(x)}"
    return type(e).__name__


def _all(parts: list[TExpr], pos: Pos) -> TExpr:
    out: TExpr = TConst(Bool(), pos, True)
    for i, p in enumerate(parts):
        out = p if i == 0 else TBinary(Bool(), pos, "&&", out, p)
    return out


def group_ref(st: StructT, header: str, prefix: str) -> StructRef:
    """A struct inside a header: its members are the header's `prefix.f` fields."""
    members: list[tuple[str, TLoc]] = []
    for n, t in st.fields:
        name = f"{prefix}.{n}"
        ref = group_ref(t, header, name) if isinstance(t, StructT) else FieldRef(header, name)
        members.append((n, TLoc(t, NOPOS, ref, name)))
    return StructRef(st, tuple(members))


def key_name(e: A.Expr) -> str | None:
    """The P4Info name of a table key (p4c TableKeyNames): a path, field, index, slice, `&`
    or constant written out, ``x.isValid()`` as ``x.$valid$``; None for anything more complex
    (p4c then requires a @name annotation)."""
    match e:
        case A.Name(name=n, orig=o):
            return o or n
        case A.Member(expr=x, member=m):
            base = key_name(x)
            return f"{base}.{m}" if base is not None else None
        case A.Index(expr=x, index=i):
            a, b = key_name(x), key_name(i)
            return f"{a}[{b}]" if a is not None and b is not None else None
        case A.Slice(expr=x, hi=h, lo=l):
            a, b, c = key_name(x), key_name(h), key_name(l)
            return f"{a}[{b}:{c}]" if None not in (a, b, c) else None
        case A.Binary(op="&", left=l, right=r):
            a, b = key_name(l), key_name(r)
            return f"{a} & {b}" if a is not None and b is not None else None
        case A.IntLit(value=v, text=t):
            return hex(v) if "0x" in t.lower() else str(v)
        case A.Call(func=A.Member(expr=x, member="isValid"), args=()):
            base = key_name(x)
            return f"{base}.$valid$" if base is not None else None
    return None


class Typer:
    """Types expressions in an :class:`Env`; reports errors and returns None for bad ones."""

    def __init__(self, layout: Layout, diags: Diagnostics) -> None:
        self.layout = layout
        self.diags = diags
        self.depth = 0  # nesting of inlined function bodies

    def err(self, pos: Pos, msg: str) -> None:
        self.diags.error(pos, msg)

    # ------------------------------------------------------------ coercion
    def coerce(self, te: TExpr, target: P4Type, pos: Pos, what: str) -> TExpr | None:
        """te converted implicitly to target (only int literals convert), else an error."""
        if te.type == target:
            return te
        if isinstance(te, TConst) and isinstance(te.type, InfInt) and isinstance(target, Bits):
            v = int(te.value)
            if v < 0 and not target.signed:
                v &= (1 << target.width) - 1
            elif v >= 1 << target.width:
                # p4c: an implicit cast of a constant truncates it, with a warning.
                kept = v & ((1 << target.width) - 1)
                self.diags.warning(pos, f"value {v} does not fit in {show(target)} ({what}); "
                                        f"it is truncated to {kept}")
                v = kept
            return TConst(target, te.pos, v)
        # A serializable enum and its underlying bit type convert implicitly.
        if isinstance(target, EnumT) and target.underlying == te.type:
            return te
        if isinstance(te.type, EnumT) and te.type.underlying == target:
            return te
        self.err(pos, f"type mismatch in {what}: expected {show(target)}, got {show(te.type)}"
                 + ("; use an explicit cast" if isinstance(target, Bits)
                    and isinstance(te.type, Bits) else ""))
        return None

    # ------------------------------------------------------------ expressions
    def expr(self, e: A.Expr, env: Env, expected: P4Type | None = None,
             lookahead_ok: bool = False) -> TExpr | None:
        """Type e.  A lookahead (``pkt.lookahead<T>()``, a field or a slice of it) is a value
        only where BMv2 reads packet bits directly (a whole select key, the whole right side
        of a parser assignment): callers in those places pass ``lookahead_ok``; anywhere else
        it is an error here rather than an expression the JSON generator cannot lower."""
        # Typed once per scope and expected type (an integer literal's type comes from it):
        # the IR recorded in the scope is the answer when the same question comes again.
        hit = env.typed.get(id(e))
        if hit is not None and hit[0] is e and (hit[1] is expected or hit[1] == expected):
            te: TExpr | None = hit[2]
        else:
            te = self._expr(e, env, expected)
            if te is not None:
                env.typed[id(e)] = (e, expected, te)
        if isinstance(te, TLookahead) and not lookahead_ok:
            self._lookahead_here(e.pos)
            return None
        if te is not None and expected is not None and isinstance(te.type, InfInt) \
                and isinstance(expected, Bits):
            return self.coerce(te, expected, e.pos, "this expression")
        return te

    def _lookahead_here(self, pos: Pos) -> None:
        self.err(pos, "unsupported construct: a lookahead inside an expression (use "
                      "pkt.lookahead<T>(), a field or a slice of it as a whole select key or "
                      "as the right side of an assignment to a field)")

    def _expr(self, e: A.Expr, env: Env, expected: P4Type | None) -> TExpr | None:
        match e:
            case A.IntLit(value=v, width=None):
                return TConst(InfInt(), e.pos, v)
            case A.IntLit(value=v, width=w, signed=s):
                assert w is not None
                if w <= 0:
                    self.err(e.pos, f"invalid width {w} in literal '{e.text}'")
                    return None
                limit = 1 << (w - 1 if s else w)
                if v >= limit:
                    self.err(e.pos, f"value {v} does not fit in {'int' if s else 'bit'}<{w}>")
                    return None
                return TConst(Bits(w, s), e.pos, v)
            case A.BoolLit(value=v):
                return TConst(Bool(), e.pos, v)
            case A.Name():
                return self._name(e, env)
            case A.Member():
                return self._member(e, env)
            case A.Index(expr=x, index=i):
                base = self.expr(x, env)
                idx = self.expr(i, env)
                if base is None or idx is None:
                    return None
                if isinstance(base, TLoc) and isinstance(base.ref, UnionStackRef) and \
                        isinstance(idx, TConst):
                    n = int(idx.value)
                    if not 0 <= n < base.ref.type.size:
                        self.err(i.pos, f"index {n} out of bounds for header union stack of "
                                        f"size {base.ref.type.size}")
                        return None
                    u = base.ref.unions[n]
                    return TLoc(u.type, e.pos, u.ref, expr_text(e))
                if isinstance(base, TLoc) and isinstance(base.ref, StructRef) and \
                        "tuple" in base.ref.type.annotations and isinstance(idx, TConst):
                    loc = base.ref.member(f"f{int(idx.value)}")
                    if loc is None:
                        self.err(i.pos, f"index {idx.value} out of bounds for "
                                        f"{show(base.type)}")
                        return None
                    return TLoc(loc.type, e.pos, loc.ref, expr_text(e))
                if not (isinstance(base, TLoc) and isinstance(base.ref, StackRef)):
                    self.err(e.pos, f"indexing needs a header stack, not {show(base.type)}")
                    return None
                if not isinstance(idx, TConst):
                    self.err(i.pos, "unsupported construct: header stack index that is not a "
                                    "compile-time constant")
                    return None
                st = base.ref.type
                n = int(idx.value)
                if not 0 <= n < st.size:
                    self.err(i.pos, f"index {n} out of bounds for header stack of size {st.size}")
                    return None
                name = f"{base.ref.name}[{n}]"
                return TLoc(st.elem, e.pos, HeaderRef(name, st.elem), expr_text(e))
            case A.Slice(expr=x, hi=h, lo=l):
                return self._slice(e, x, h, l, env)
            case A.Unary():
                return self._unary(e, env, expected)
            case A.Binary():
                return self._binary(e, env, expected)
            case A.Ternary(cond=c, then=a, other=b):
                tc = self.expr(c, env, Bool())
                ta = self.expr(a, env, expected)
                tb = self.expr(b, env, expected)
                if tc is None or ta is None or tb is None:
                    return None
                tc2 = self._want_bool(tc, c.pos, "a condition")
                ta, tb = self._unify(ta, tb, e.pos, "'?:'")
                if tc2 is None or ta is None or tb is None:
                    return None
                if isinstance(tc2, TConst):
                    return ta if tc2.value else tb
                if isinstance(ta.type, InfInt):
                    self.err(e.pos, "cannot infer the width of '?:' operands; add a cast")
                    return None
                return TTernary(ta.type, e.pos, tc2, ta, tb)
            case A.Cast(type=t, expr=x):
                return self._cast(e, t, x, env)
            case A.Call():
                return self._call_expr(e, env)
            case A.ListExpr(items=items) if isinstance(expected, (StructT, HeaderT)):
                return self._initializer(e, expected, env)
            case A.ListExpr(items=items):
                typed = [self.expr(i, env) for i in items]
                if any(t is None for t in typed):
                    return None
                return TList(Bool(), e.pos, tuple(t for t in typed if t is not None))
            case A.StrLit(value=v):
                return TString(Str(), e.pos, v)
        self.err(e.pos, f"unsupported construct: {type(e).__name__} expression")
        return None

    def _initializer(self, e: A.ListExpr, t: StructT | HeaderT, env: Env) -> TExpr | None:
        """``{1, 2}`` or ``{a = 1, b = 2}`` where a struct or header is expected: one value per
        field, in field order, each of the field's type (spec §8.11, §8.12)."""
        fields = t.members() if isinstance(t, HeaderT) else list(t.fields)
        names = [n for n, _ in fields]
        what = f"{'header' if isinstance(t, HeaderT) else 'struct'} {t.name}"
        if e.names:
            given = dict(zip(e.names, e.items))
            unknown_names = [n for n in e.names if n not in names]
            if unknown_names or len(given) != len(e.names):
                self.err(e.pos, unknown(f"field of {what}:", unknown_names[0], names)
                         if unknown_names else f"a field of {what} is initialized twice")
                return None
            missing = [n for n in names if n not in given]
            if missing:
                self.err(e.pos, f"the initializer of {what} has no value for '{missing[0]}'")
                return None
            items = [given[n] for n in names]
        else:
            if len(e.items) != len(names):
                self.err(e.pos, f"{what} has {len(names)} field(s); the initializer gives "
                                f"{len(e.items)}")
                return None
            items = list(e.items)
        typed: list[TExpr] = []
        for (fname, ft), item in zip(fields, items):
            te = self.expr(item, env, ft)
            if te is None:
                return None
            c = self.coerce(te, ft, item.pos, f"field '{fname}' of {what}")
            if c is None:
                return None
            typed.append(c)
        return TList(t, e.pos, tuple(typed))

    def _inline_function(self, e: A.Call, name: str, decls: list[A.FunctionDecl],
                         env: Env) -> TExpr | None:
        """``f(args)`` where f's body is ``return e;``: the typed ``e`` with parameters bound to
        the (typed, coerced) arguments; P4 forbids recursion, a depth guard keeps it so."""
        decl = next((d for d in decls if d.body is not None and len(d.params) == len(e.args)),
                    None)
        if decl is None:
            self.err(e.pos, f"unsupported construct: call of extern function '{name}' inside "
                            "an expression (call it as a statement)")
            return None
        assert decl.body is not None
        if not (len(decl.body.stmts) == 1 and isinstance(decl.body.stmts[0], A.Return)) or \
                decl.type_params:
            # InlineFunctions expanded the calls it can place in statements; this one is in a
            # place it cannot (a table key, a default action argument, ...), or is generic.
            self.err(e.pos, f"unsupported construct: call of function '{name}' here (a "
                            "function with statements or type parameters, called where no "
                            "statement can run first)")
            return None
        if self.depth > 16:
            self.err(e.pos, f"function '{name}' calls itself (recursion is not allowed in P4)")
            return None
        inner = Env(None, env.g, env.block)
        for p, a in zip(decl.params, e.args):
            if p.direction in ("out", "inout"):
                self.err(a.pos, f"unsupported construct: {p.direction} parameter '{p.name}' of "
                                f"function '{name}'")
                return None
            pt = env.g.typed.declared(p.type, env.g, self.diags)
            te = self.expr(a.value, env, pt) if a.value is not None and pt is not None else None
            if te is None or pt is None:
                return None
            c = self.coerce(te, pt, a.pos, f"argument '{p.name}' of '{name}'")
            if c is None:
                return None
            inner.add(Sym(SymKind.EXPR, p.name, c))
        body = decl.body
        assert body is not None and isinstance(body.stmts[0], A.Return)
        ret = body.stmts[0].value
        rt = env.g.typed.declared(decl.ret, env.g, self.diags)
        if ret is None or rt is None:
            return None
        self.depth += 1
        try:
            te = self.expr(ret, inner, rt)
        finally:
            self.depth -= 1
        return self.coerce(te, rt, ret.pos, f"return value of '{name}'") if te else None

    def _want_bool(self, te: TExpr, pos: Pos, what: str) -> TExpr | None:
        if isinstance(te.type, Bool):
            return te
        self.err(pos, f"{what} must be bool, got {show(te.type)}")
        return None

    def _name(self, e: A.Name, env: Env) -> TExpr | None:
        sym = env.bind(e)
        if sym is None:
            self.err(e.pos, unknown("name", e.name, env.names()))
            return None
        if sym.kind is SymKind.VAR:
            loc = sym.value
            assert isinstance(loc, TLoc)
            return TLoc(loc.type, e.pos, loc.ref, loc.text)
        if sym.kind is SymKind.EXPR:
            te = sym.value
            assert isinstance(te, TExpr)
            return te
        if sym.kind is SymKind.CONST:
            if isinstance(sym.value, TConst):
                return TConst(sym.value.type, e.pos, sym.value.value)
            cv = sym.value
            assert isinstance(cv, ConstValue)
            return TConst(cv.type, e.pos, cv.value)
        self.err(e.pos, f"'{e.name}' is a {sym.kind.value}, not a value")
        return None

    def _member(self, e: A.Member, env: Env) -> TExpr | None:
        x, m = e.expr, e.member
        if isinstance(x, A.Name) and x.name == "error":
            errs = env.g.errors
            if m not in errs:
                self.err(e.pos, unknown("error", m, errs))
                return None
            return TConst(ErrorT(), e.pos, errs.index(m))
        if isinstance(x, A.Name):
            sym = env.bind(x)
            if sym is not None and sym.kind is SymKind.TYPE:
                et = sym.value
                if isinstance(et, EnumT):
                    if m not in et.members:
                        self.err(e.pos, unknown(f"member of enum '{et.name}':", m, et.members))
                        return None
                    return TConst(et, e.pos, et.values[et.members.index(m)])
                self.err(e.pos, f"type '{x.name}' has no member '{m}'")
                return None
        base = self.expr(x, env, lookahead_ok=True)
        if base is None:
            return None
        if isinstance(base, TLookahead) and isinstance(base.type, (HeaderT, StructT)):
            off = base.offset
            for fname, fty in base.type.fields:
                if fname == m:
                    return TLookahead(fty, e.pos, off)
                off += lookahead_width(fty) or 0
            self.err(e.pos, unknown(f"field of '{base.type.name}':", m,
                                    [n for n, _ in base.type.fields]))
            return None
        if isinstance(base, TLoc):
            ref = base.ref
            text = f"{base.text}.{m}"
            if isinstance(ref, UnionStackRef):
                if m == "size":
                    return TConst(Bits(32), e.pos, ref.type.size)
                if m == "lastIndex" and env.block in env.g.parsers:
                    return TLastIndex(Bits(32), e.pos, ref.name, True)
                if m == "next" and env.block in env.g.parsers:
                    return TLoc(ref.type.elem, e.pos, UnionStackNextRef(ref.name, ""), text)
                self.err(e.pos, f"unsupported construct: header union stack member '{m}'")
                return None
            if isinstance(ref, UnionStackNextRef) and isinstance(base.type, UnionT) and \
                    not ref.member:
                mt = next((t for n, t in base.type.fields if n == m), None)
                if mt is None:
                    self.err(e.pos, unknown(f"member of '{base.type.name}':", m,
                                            [n for n, _ in base.type.fields]))
                    return None
                return TLoc(mt, e.pos, UnionStackNextRef(ref.stack, m), text)
            if isinstance(ref, (StructRef, UnionRef)):
                loc = ref.member(m)
                if loc is None:
                    self.err(e.pos, unknown(f"field of '{ref.type.name}':", m,
                                            [n for n, _ in ref.members]))
                    return None
                return TLoc(loc.type, e.pos, loc.ref, text)
            if isinstance(ref, HeaderRef):
                ft = ref.type.field(m)
                group = next((st for n, st in ref.type.groups if n == m), None)
                if ft is None and group is not None:
                    return TLoc(group, e.pos, group_ref(group, ref.name, m), text)
                if ft is None:
                    if m in ("isValid", "setValid", "setInvalid"):
                        self.err(e.pos, f"method '{m}' must be called: {m}()")
                    else:
                        self.err(e.pos, unknown(f"field of header '{ref.type.name}':", m,
                                                [n for n, _ in ref.type.fields]))
                    return None
                return TLoc(ft, e.pos, FieldRef(ref.name, m), text)
            if isinstance(ref, StackLastRef):
                ft = ref.type.elem.field(m)
                if ft is None:
                    self.err(e.pos, unknown(f"field of header '{ref.type.elem.name}':", m,
                                            [n for n, _ in ref.type.elem.fields]))
                    return None
                return TLoc(ft, e.pos, StackFieldRef(ref.name, m), text)
            if isinstance(ref, StackRef) and isinstance(base.type, StackT):
                if m in _PARSER_ONLY_STACK_MEMBERS and env.block not in env.g.parsers:
                    # P4_16 (header stacks): next, last and lastIndex exist only inside
                    # parsers, where extraction moves nextIndex; p4c rejects them elsewhere.
                    self.err(e.pos, f"'{text}': header stack member '{m}' can only be used "
                                    f"in a parser")
                    return None
                if m == "next":
                    return TLoc(ref.type.elem, e.pos, ref, text)
                if m == "last":
                    return TLoc(ref.type.elem, e.pos, StackLastRef(ref.name, ref.type), text)
                if m == "size":
                    return TConst(Bits(32), e.pos, ref.type.size)
                if m == "lastIndex":
                    return TLastIndex(Bits(32), e.pos, ref.name)
                self.err(e.pos, f"unsupported construct: header stack member '{m}'")
                return None
            if isinstance(ref, StackRef):
                # `.next` is a location only as extract's argument (BMv2 has no reference to
                # the element after the last extracted one).
                self.err(e.pos, f"unsupported construct: '{text}' (a header stack's .next "
                                f"can only be extracted into)")
                return None
        if isinstance(base, TList) and isinstance(base.type, (StructT, HeaderT)):
            # A member of a structure-valued expression (a list or initializer bound to a
            # parameter of an inlined function): that member's value.
            names = [n for n, _ in (base.type.members() if isinstance(base.type, HeaderT)
                                    else base.type.fields)]
            if m in names and len(names) == len(base.items):
                return base.items[names.index(m)]
        self.err(e.pos, f"{show(base.type)} has no member '{m}'")
        return None

    def _slice(self, e: A.Expr, x: A.Expr, h: A.Expr, l: A.Expr, env: Env) -> TExpr | None:
        base = self.expr(x, env, lookahead_ok=True)
        th = self.expr(h, env)
        tl = self.expr(l, env)
        if base is None or th is None or tl is None:
            return None
        if not (isinstance(th, TConst) and isinstance(tl, TConst)):
            self.err(e.pos, "slice bounds must be compile-time constants")
            return None
        if not isinstance(base.type, Bits):
            self.err(e.pos, f"cannot slice a value of type {show(base.type)}")
            return None
        hi, lo = int(th.value), int(tl.value)
        if not (0 <= lo <= hi < base.type.width):
            self.err(e.pos, f"slice [{hi}:{lo}] out of range for {show(base.type)}")
            return None
        t = Bits(hi - lo + 1)
        if isinstance(base, TConst):
            return TConst(t, e.pos, (int(base.value) >> lo) & ((1 << (hi - lo + 1)) - 1))
        if isinstance(base, TLookahead):
            # Bits are numbered from the least significant, lookahead offsets from the first
            # bit on the wire: [hi:lo] of a W-bit lookahead is the (hi-lo+1) bits starting
            # W-1-hi bits further on (p4c's bmv2 backend emits the same narrower lookahead).
            return TLookahead(t, e.pos, base.offset + base.type.width - 1 - hi)
        if isinstance(base, TSlice):
            # x[a:b][c:d] is x[b+c : b+d]: one slice of x (so it stays an lvalue).
            return TSlice(t, e.pos, base.operand, base.lo + hi, base.lo + lo)
        return TSlice(t, e.pos, base, hi, lo)

    def _unary(self, e: A.Unary, env: Env, expected: P4Type | None) -> TExpr | None:
        if e.op == "!":
            x = self.expr(e.operand, env, Bool())
            if x is None or self._want_bool(x, e.operand.pos, "operand of '!'") is None:
                return None
            if isinstance(x, TConst):
                return TConst(Bool(), e.pos, not x.value)
            return TUnary(Bool(), e.pos, "!", x)
        x = self.expr(e.operand, env, expected if isinstance(expected, Bits) else None)
        if x is None:
            return None
        if not isinstance(x.type, (Bits, InfInt)):
            self.err(e.pos, f"operator '{e.op}' needs a number, got {show(x.type)}")
            return None
        if isinstance(x, TConst):
            v = -int(x.value) if e.op == "-" else ~int(x.value)
            if isinstance(x.type, Bits):
                v &= (1 << x.type.width) - 1
                if x.type.signed and v >> (x.type.width - 1):
                    v -= 1 << x.type.width  # signed constants are kept as their value
            elif e.op == "~":
                self.err(e.pos, "cannot complement an integer of unknown width; add a cast")
                return None
            return TConst(x.type, e.pos, v)
        return TUnary(x.type, e.pos, e.op, x)

    def _unify(self, a: TExpr, b: TExpr, pos: Pos, what: str) -> tuple[TExpr | None, TExpr | None]:
        if a.type == b.type:
            return a, b
        if isinstance(a.type, InfInt) and isinstance(b.type, Bits):
            return self.coerce(a, b.type, pos, what), b
        if isinstance(b.type, InfInt) and isinstance(a.type, Bits):
            return a, self.coerce(b, a.type, pos, what)
        for x, y in ((a, b), (b, a)):
            if isinstance(x.type, EnumT) and x.type.underlying is not None:
                if y.type == x.type.underlying or isinstance(y.type, InfInt):
                    if isinstance(y.type, InfInt):
                        y = self.coerce(y, x.type.underlying, pos, what) or y
                    return (x, y) if x is a else (y, x)
        if isinstance(a.type, Bits) and isinstance(b.type, Bits):
            self.err(pos, f"width mismatch in {what}: {show(a.type)} and {show(b.type)}; "
                          "use an explicit cast")
        else:
            self.err(pos, f"type mismatch in {what}: {show(a.type)} and {show(b.type)}")
        return None, None

    def _binary(self, e: A.Binary, env: Env, expected: P4Type | None) -> TExpr | None:
        op = e.op
        what = f"'{op}'"
        if op in ("&&", "||"):
            a = self.expr(e.left, env, Bool())
            b = self.expr(e.right, env, Bool())
            if a is None or b is None:
                return None
            if self._want_bool(a, e.left.pos, f"operand of {what}") is None or \
                    self._want_bool(b, e.right.pos, f"operand of {what}") is None:
                return None
            if isinstance(a, TConst) and isinstance(b, TConst):
                return TConst(Bool(), e.pos, (a.value and b.value) if op == "&&"
                              else (a.value or b.value))
            return TBinary(Bool(), e.pos, op, a, b)
        want = expected if isinstance(expected, Bits) and op not in _COMPARE else None
        if op in ("==", "!=") and isinstance(e.left, A.ListExpr) != \
                isinstance(e.right, A.ListExpr):
            # `s == { ... }` (a struct constant is one, see struct_consts): the list takes
            # the other side's type, as p4c's type inference gives it.
            a = self.expr(e.right if isinstance(e.left, A.ListExpr) else e.left, env, None)
            if a is None:
                return None
            b = self.expr(e.left if isinstance(e.left, A.ListExpr) else e.right, env, a.type)
            if b is None:
                return None
            if isinstance(a.type, StructT) and isinstance(b, TList):
                eq = self._aggregate_eq(a, b, e.pos)
                if eq is None:
                    self.err(e.pos, f"unsupported construct: comparing {show(a.type)} values")
                    return None
                return eq if op == "==" else TUnary(Bool(), e.pos, "!", eq)
        else:
            a = self.expr(e.left, env, None)
            b = self.expr(e.right, env, None)
        if a is None or b is None:
            return None
        if op in ("<<", ">>"):
            if isinstance(a.type, InfInt) and want is not None and not isinstance(b, TConst):
                a = self.coerce(a, want, e.pos, what)
                if a is None:
                    return None
            if not isinstance(a.type, (Bits, InfInt)) or not isinstance(b.type, (Bits, InfInt)):
                self.err(e.pos, f"operands of {what} must be numbers")
                return None
            if isinstance(b.type, Bits) and b.type.signed:
                self.err(e.right.pos, "shift amount must be unsigned")
                return None
            if isinstance(a, TConst) and isinstance(b, TConst):
                return self._fold(op, a, b, e.pos)
            if isinstance(a.type, InfInt):
                self.err(e.pos, f"cannot infer the width of the left operand of {what}; "
                                "add a cast")
                return None
            return TBinary(a.type, e.pos, op, a, b)
        if op == "++":
            if isinstance(a.type, InfInt) or isinstance(b.type, InfInt):
                self.err(e.pos, "operands of '++' need a known width; add a cast")
                return None
            if not (isinstance(a.type, Bits) and isinstance(b.type, Bits)):
                self.err(e.pos, f"operands of '++' must be bit strings, got {show(a.type)} and "
                                f"{show(b.type)}")
                return None
            cat = Bits(a.type.width + b.type.width, a.type.signed)
            if isinstance(a, TConst) and isinstance(b, TConst):
                return TConst(cat, e.pos, (int(a.value) << b.type.width) | int(b.value))
            return TConcat(cat, e.pos, a, b)
        if isinstance(a.type, InfInt) and isinstance(b.type, InfInt) and want is not None \
                and not (isinstance(a, TConst) and isinstance(b, TConst)):
            a = self.coerce(a, want, e.pos, what)
        ua, ub = self._unify(a, b, e.pos, what) if a is not None else (None, None)
        if ua is None or ub is None:
            return None
        t = ua.type
        if op in _COMPARE:
            if op not in ("==", "!=") and not isinstance(t, (Bits, InfInt)):
                self.err(e.pos, f"operator {what} needs numbers, got {show(t)}")
                return None
            if isinstance(t, (HeaderT, StructT, StackT)):
                eq = self._aggregate_eq(ua, ub, e.pos)
                if eq is None:
                    self.err(e.pos, f"unsupported construct: comparing {show(t)} values")
                    return None
                return eq if op == "==" else TUnary(Bool(), e.pos, "!", eq)
            if isinstance(ua, TConst) and isinstance(ub, TConst):
                return self._fold(op, ua, ub, e.pos)
            return TBinary(Bool(), e.pos, op, ua, ub)
        if not isinstance(t, (Bits, InfInt)):
            self.err(e.pos, f"operator {what} needs numbers, got {show(t)}")
            return None
        if isinstance(ua, TConst) and isinstance(ub, TConst):
            return self._fold(op, ua, ub, e.pos)
        if op in ("/", "%"):
            if isinstance(t, Bits) and t.signed:
                # p4c's type checker: / and % are defined on unsigned values only.
                self.err(e.pos, f"{what}: cannot operate on signed values")
                return None
            d = int(ub.value) if isinstance(ub, TConst) else 0
            if isinstance(t, Bits) and d > 0 and d & (d - 1) == 0:
                # By a power of two: a shift or a mask, as p4c's strength reduction makes it.
                k = d.bit_length() - 1
                if op == "/":
                    return TBinary(t, e.pos, ">>", ua, TConst(Bits(32), e.pos, k)) if k else ua
                return TBinary(t, e.pos, "&", ua, TConst(t, e.pos, d - 1))
            # Otherwise BMv2's own "/" and "%" expression operators, as p4c-bm2-ss emits them
            # (masked to the width like every arithmetic result).  BMv2 requires a divisor
            # > 0 (it asserts); netsum-switch yields 0 for a zero divisor.
        return TBinary(t, e.pos, op, ua, ub)

    def _aggregate_eq(self, a: TExpr, b: TExpr, pos: Pos) -> TExpr | None:
        """`a == b` for headers, structs and stacks, member by member (spec §8.16: two
        headers are equal when both are invalid, or both valid with equal fields)."""
        parts: list[TExpr] = []
        if isinstance(a, TLoc) and isinstance(a.ref, StructRef) and isinstance(b, TList) and \
                len(b.items) == len(a.ref.members):
            # A struct against a list of its member values (a struct constant).
            return self._members_eq([(x, y) for (_, x), y in zip(a.ref.members, b.items)], pos)
        if not (isinstance(a, TLoc) and isinstance(b, TLoc)):
            return None
        if isinstance(a.ref, HeaderRef) and isinstance(b.ref, HeaderRef):
            for n, ft in a.ref.type.fields:
                x = TLoc(ft, pos, FieldRef(a.ref.name, n), f"{a.text}.{n}")
                y = TLoc(ft, pos, FieldRef(b.ref.name, n), f"{b.text}.{n}")
                parts.append(TBinary(Bool(), pos, "==", x, y))
            va, vb = TIsValid(Bool(), pos, a.ref.name), TIsValid(Bool(), pos, b.ref.name)
            both = TBinary(Bool(), pos, "&&", va, vb)
            fields = _all(parts, pos)
            valid_eq = TBinary(Bool(), pos, "&&", both, fields) if parts else both
            none = TBinary(Bool(), pos, "&&", TUnary(Bool(), pos, "!", va),
                           TUnary(Bool(), pos, "!", vb))
            return TBinary(Bool(), pos, "||", none, valid_eq)
        if isinstance(a.ref, StructRef) and isinstance(b.ref, StructRef):
            return self._members_eq([(x, y) for (_, x), (_, y) in zip(a.ref.members,
                                                                       b.ref.members)], pos)
        if isinstance(a.ref, StackRef) and isinstance(b.ref, StackRef):
            st = a.ref.type
            for i in range(st.size):
                x = TLoc(st.elem, pos, HeaderRef(f"{a.ref.name}[{i}]", st.elem), a.text)
                y = TLoc(st.elem, pos, HeaderRef(f"{b.ref.name}[{i}]", st.elem), b.text)
                sub = self._aggregate_eq(x, y, pos)
                if sub is None:
                    return None
                parts.append(sub)
            return _all(parts, pos)
        return None

    def _members_eq(self, pairs: list[tuple[TExpr, TExpr]], pos: Pos) -> TExpr | None:
        """All members equal: aggregates member by member, the rest with `==`."""
        parts: list[TExpr] = []
        for x, y in pairs:
            if isinstance(x.type, (HeaderT, StructT, StackT)):
                sub = self._aggregate_eq(x, y, pos)
                if sub is None:
                    return None
                parts.append(sub)
            else:
                parts.append(TBinary(Bool(), pos, "==", x, y))
        return _all(parts, pos)

    def _fold(self, op: str, a: TConst, b: TConst, pos: Pos) -> TExpr | None:
        cv = fold_binary(op, ConstValue(a.type, a.value), ConstValue(b.type, b.value), pos,
                         self.diags)
        return TConst(cv.type, pos, cv.value) if cv is not None else None

    def _cast(self, e: A.Cast, t: A.TypeExpr, x: A.Expr, env: Env) -> TExpr | None:
        target = env.g.typed.declared(t, env.g, self.diags)
        inner = self.expr(x, env, lookahead_ok=True)
        if target is None or inner is None:
            return None
        src = inner.type
        if isinstance(inner, TConst):
            if isinstance(target, Bits) and isinstance(src, (Bits, InfInt, Bool, EnumT)):
                v = int(inner.value) & ((1 << target.width) - 1)
                if target.signed and v >> (target.width - 1):
                    v -= 1 << target.width
                return TConst(target, e.pos, v)
            if isinstance(target, Bool) and isinstance(src, (Bits, InfInt)):
                return TConst(target, e.pos, bool(inner.value))
        if src == target:
            return inner  # a no-op cast keeps a lookahead a lookahead
        if isinstance(inner, TLookahead):
            self._lookahead_here(x.pos)
            return None
        ok = ((isinstance(target, Bits) and isinstance(src, (Bits, Bool)))
              or (isinstance(target, Bool) and isinstance(src, Bits) and src.width == 1)
              or (isinstance(target, Bits) and isinstance(src, EnumT) and src.underlying)
              or (isinstance(target, EnumT) and isinstance(src, Bits)))
        if isinstance(src, Bool) and isinstance(target, Bits) and target.width != 1:
            ok = False
        if not ok:
            self.err(e.pos, f"illegal cast from {show(src)} to {show(target)}")
            return None
        return TCast(target, e.pos, inner)

    def _call_expr(self, e: A.Call, env: Env) -> TExpr | None:
        f = e.func
        if isinstance(f, A.Name):
            sym = env.bind(f)
            if sym is not None and sym.kind is SymKind.FUNCTION:
                assert isinstance(sym.value, list)   # a FUNCTION symbol holds its overloads
                return self._inline_function(e, f.name, sym.value, env)
        if isinstance(f, A.Member) and f.member == "isValid" and not e.args:
            base = self.expr(f.expr, env)
            if base is None:
                return None
            if isinstance(base, TLoc) and isinstance(base.ref, HeaderRef):
                return TIsValid(Bool(), e.pos, base.ref.name)
            if isinstance(base, TLoc) and isinstance(base.ref, UnionRef):
                return TUnionValid(Bool(), e.pos, base.ref.name)
            self.err(e.pos, f"isValid() needs a header, not {show(base.type)}")
            return None
        if isinstance(f, A.Member) and f.member == "lookahead" and len(e.type_args) == 1:
            pk = env.lookup(f.expr.name) if isinstance(f.expr, A.Name) else None
            if pk is None or pk.kind is not SymKind.PACKET:
                self.err(e.pos, "lookahead is a method of packet_in")
                return None
            t = env.g.typed.declared(e.type_args[0], env.g, self.diags)
            if t is None:
                return None
            if not isinstance(t, (Bits, HeaderT)) and not (
                    isinstance(t, StructT) and lookahead_width(t) is not None):
                # A struct of bit strings, headers and stacks reads like a header (its
                # members' offsets add up).
                self.err(e.pos, f"unsupported construct: lookahead of {show(t)}")
                return None
            return TLookahead(t, e.pos)
        if isinstance(f, A.Member) and f.member in ("hit", "miss", "action_run"):
            self.err(e.pos, "unsupported construct: table apply result here")
            return None
        self.err(e.pos, f"unsupported construct: call of '{expr_text(f)}' inside an expression"
                        " (call it as a statement)")
        return None
