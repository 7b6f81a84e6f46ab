"""The type check, call half: binds a call statement to what it calls and types its arguments.

A call is one of: an action, a v1model/core extern function, a method of an extern instance,
a header method (isValid/setValid/setInvalid), a header stack method, ``table.apply()``, or a
packet_in/packet_out method.  Arguments are matched to the declared parameters (by position
or name), generic parameters are inferred, and ``out``/``inout`` arguments must be writable.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from . import ast as A
from .diagnostics import Pos, unknown
from .ir import FieldRef, HeaderRef, ParamRef, StackRef, TConst, TExpr, TList, TLoc, TSlice
from .resolve import Globals, resolve_type
from .scopes import Env, ExternInstance, Sym, SymKind
from .typecheck import Typer, expr_text
from .types import Bits, InfInt, P4Type, StructT, TypeVar, show

__all__ = ["CallKind", "CallInfo", "resolve_call", "writable"]


class CallKind(enum.Enum):
    ACTION = "action"
    FUNCTION = "extern function"
    METHOD = "extern method"
    HEADER = "header method"
    STACK = "header stack method"
    APPLY = "table apply"
    PACKET = "packet method"
    SUBAPPLY = "control apply"


@dataclass(frozen=True, slots=True)
class CallInfo:
    kind: CallKind
    name: str                       # action/function/method name
    target: object                  # ActionDecl+qualified | ExternInstance | TLoc | TableDecl
    args: tuple[TExpr | None, ...]  # aligned with params; None where omitted/don't-care
    params: tuple[A.Param, ...]
    type_args: tuple[P4Type, ...]
    pos: Pos
    qualified: str = ""
    #: A control's extern-typed parameters (`register<bit<8>> r`), bound to the caller's
    #: instances: (parameter, the instance's symbol); not among params/args.
    externs: tuple[tuple[str, Sym], ...] = ()


def _match_args(call: A.Call, params: tuple[A.Param, ...], what: str,
                typer: Typer) -> list[A.Expr | None] | None:
    args = call.args
    out: list[A.Expr | None] = [None] * len(params)
    if any(a.name for a in args):
        names = [p.name for p in params]
        for a in args:
            if a.name not in names:
                typer.err(a.pos, unknown(f"parameter of {what}:", a.name or "?", names))
                return None
            out[names.index(a.name)] = a.value
    else:
        if len(args) > len(params):
            typer.err(call.pos, f"{what} takes {len(params)} argument(s), got {len(args)}")
            return None
        for i, a in enumerate(args):
            out[i] = a.value
    # `pkt.extract<H>(_)` skips a header (p4c extracts it into a temporary): the don't-care
    # argument is allowed there only, and lowered as an `advance` over H.
    skip_ok = what == "'packet_in.extract'" and len(call.type_args) == 1 and \
        len(args) >= 1 and args[0].value is None and not args[0].name
    for i, (p, given) in enumerate(zip(params, out)):
        if given is None and p.default is None and not _optional(p) and \
                not (skip_ok and i == 0):
            typer.err(call.pos, f"{what}: missing argument for parameter '{p.name}'")
            return None
    return out


def _extern_args(call: A.Call, params: tuple[A.Param, ...], env: Env
                 ) -> tuple[A.Call, tuple[A.Param, ...], tuple[tuple[str, Sym], ...]] | None:
    """The call and parameters without the extern-typed ones, and what those are bound to
    (p4c inlines the control with the instance in place of the parameter)."""
    ext = [i for i, p in enumerate(params)
           if isinstance(p.type, A.TypeName) and p.type.name in env.g.externs]
    if not ext:
        return call, params, ()
    if any(a.name for a in call.args) or len(call.args) != len(params):
        return None
    bound: list[tuple[str, Sym]] = []
    for i in ext:
        v = call.args[i].value
        sym = env.bind(v) if isinstance(v, A.Name) else None
        if sym is None or sym.kind is not SymKind.EXTERN:
            return None
        bound.append((params[i].name, sym))
    keep = [i for i in range(len(params)) if i not in ext]
    return (dataclasses.replace(call, args=tuple(call.args[i] for i in keep)),
            tuple(params[i] for i in keep), tuple(bound))


def _optional(p: A.Param) -> bool:
    return any(an.name == "optional" for an in p.annotations)


def type_args_of(call: A.Call, typer: Typer, env: Env) -> tuple[P4Type, ...] | None:
    out: list[P4Type] = []
    for t in call.type_args:
        r = env.g.typed.declared(t, env.g, typer.diags)
        if r is None:
            return None
        out.append(r)
    return tuple(out)


def _typed_args(call: A.Call, params: tuple[A.Param, ...], what: str, typer: Typer, env: Env,
                type_vars: dict[str, P4Type],
                tparams: tuple[str, ...] = ()) -> tuple[TExpr | None, ...] | None:
    exprs = _match_args(call, params, what, typer)
    if exprs is None:
        return None
    g = env.g
    ptypes: list[P4Type | None] = []
    for p in params:
        ptypes.append(_param_type(p, g, typer, tparams, type_vars))
    typed: list[TExpr | None] = [None] * len(params)
    ok = True
    # Pass 1: arguments whose types decide generic parameters (anything but bare literals).
    for i, (p, e) in enumerate(zip(params, exprs)):
        if e is None:
            continue
        pt = ptypes[i]
        generic = isinstance(pt, TypeVar) and pt.name not in type_vars
        te = typer.expr(e, env, None if generic or pt is None else pt)
        if te is None:
            ok = False
            continue
        if generic and not isinstance(te.type, InfInt):
            assert isinstance(pt, TypeVar)
            type_vars[pt.name] = te.type
        typed[i] = te
    # Pass 2: check every argument against its (now bound) parameter type.
    for i, (p, e) in enumerate(zip(params, exprs)):
        te = typed[i]
        if te is None or e is None:
            continue
        pt = _param_type(p, g, typer, tparams, type_vars)
        if isinstance(pt, TypeVar):
            if isinstance(te.type, InfInt):
                typer.err(e.pos, f"cannot infer the width of '{expr_text(e)}' for parameter "
                                 f"'{p.name}' of {what}; add a cast")
                ok = False
            continue
        if pt is not None and not _accepts(pt, te):
            c = typer.coerce(te, pt, e.pos, f"argument '{p.name}' of {what}")
            if c is None:
                ok = False
                continue
            typed[i] = c
        if p.direction in ("out", "inout"):
            if not writable(te):
                typer.err(e.pos, f"argument '{p.name}' of {what} is an {p.direction} parameter;"
                                 f" it needs a writable location, not '{expr_text(e)}'")
                ok = False
    return tuple(typed) if ok else None


def writable(te: TExpr) -> bool:
    """An lvalue: a location, or a slice of a field (P4_16 §6.7)."""
    if isinstance(te, TSlice):
        return writable(te.operand) and isinstance(te.operand, TLoc) and \
            isinstance(te.operand.ref, FieldRef)
    return isinstance(te, TLoc) and not isinstance(te.ref, ParamRef)


def _accepts(pt: P4Type, te: TExpr) -> bool:
    if pt == te.type:
        return True
    # A list {a, b} stands for a struct with fields of the same types (digest<T> data).
    if isinstance(pt, StructT) and isinstance(te, TList):
        return len(pt.fields) == len(te.items) and all(
            it.type == ft or (isinstance(it, TConst) and isinstance(it.type, InfInt))
            for (_, ft), it in zip(pt.fields, te.items))
    return False


def _param_type(p: A.Param, g: Globals, typer: Typer, tparams: tuple[str, ...],
                type_vars: dict[str, P4Type]) -> P4Type | None:
    """A parameter's type: the declared type recorded once when nothing generic is in scope
    (actions, most functions), else bound to this call's type variables."""
    if not tparams and not type_vars:
        return g.typed.declared(p.type, g, typer.diags)
    return resolve_type(p.type, g, typer.diags, _with_vars(tparams, type_vars))


def _with_vars(tparams: tuple[str, ...], tv: dict[str, P4Type]) -> dict[str, P4Type]:
    """Type variables for resolve_type: bound ones, and unbound ones as TypeVar."""
    out: dict[str, P4Type] = {n: TypeVar(n) for n in tparams}
    out.update(tv)
    return out


def resolve_call(call: A.Call, env: Env, typer: Typer) -> CallInfo | None:
    f = call.func
    g = env.g
    targs = type_args_of(call, typer, env)
    if targs is None:
        return None
    if isinstance(f, A.Name):
        sym = env.bind(f)
        if sym is None:
            typer.err(f.pos, unknown("action or function", f.name, env.names()))
            return None
        if sym.kind is SymKind.ACTION and f.name in g.functions and \
                not any(a.name for a in call.args) and \
                len(call.args) > len(sym.value.params):  # type: ignore[attr-defined]
            # p4c picks among the declarations of a name by argument count: an action named
            # like an extern function (`action hash() { hash(...); }`) calls the function.
            sym = dataclasses.replace(sym, kind=SymKind.FUNCTION, value=g.functions[f.name])
        if sym.kind is SymKind.ACTION:
            decl = sym.value
            assert isinstance(decl, A.ActionDecl)
            args = _typed_args(call, decl.params, f"action '{f.name}'", typer, env, {})
            if args is None:
                return None
            return CallInfo(CallKind.ACTION, f.name, decl, args, decl.params, targs, call.pos,
                             sym.qualified)
        if sym.kind is SymKind.FUNCTION:
            overloads = sym.value
            assert isinstance(overloads, list)
            fdecl = next((d for d in overloads if len(d.params) == len(call.args)), overloads[0])
            tv = dict(zip(fdecl.type_params, targs))
            args = _typed_args(call, fdecl.params, f"'{f.name}'", typer, env, tv,
                               fdecl.type_params)
            if args is None:
                return None
            return CallInfo(CallKind.FUNCTION, f.name, fdecl, args, fdecl.params, targs,
                            call.pos)
        typer.err(f.pos, f"'{f.name}' is a {sym.kind.value}; it cannot be called")
        return None
    if not isinstance(f, A.Member):
        typer.err(call.pos, "unsupported construct: this kind of call")
        return None
    base, m = f.expr, f.member
    if isinstance(base, A.Name):
        sym = env.bind(base)
        if sym is not None and sym.kind is SymKind.TABLE:
            if m != "apply":
                typer.err(f.pos, f"table '{base.name}' has no method '{m}' (only apply())")
                return None
            return CallInfo(CallKind.APPLY, base.name, sym.value, (), (), (), call.pos,
                            sym.qualified)
        if sym is not None and sym.kind is SymKind.SUBCONTROL:
            if m != "apply":
                typer.err(f.pos, f"control instance '{base.name}' has no method '{m}' "
                                 "(only apply(...))")
                return None
            cdecl = sym.value.decl  # type: ignore[attr-defined]
            split = _extern_args(call, cdecl.params, env)
            if split is None:
                typer.err(call.pos, f"'{base.name}.apply': an extern parameter needs an extern "
                                    "instance of the caller, passed by position")
                return None
            call, params, bound = split
            args = _typed_args(call, params, f"'{base.name}.apply'", typer, env, {})
            if args is None:
                return None
            return CallInfo(CallKind.SUBAPPLY, base.name, sym.value, args, params, (),
                            call.pos, sym.qualified, bound)
        if sym is not None and sym.kind is SymKind.EXTERN:
            inst = sym.value
            assert isinstance(inst, ExternInstance)
            edecl = g.externs[inst.extern]
            methods = [md for md in edecl.methods if md.name == m and md.ret is not None]
            if not methods:
                typer.err(f.pos, unknown(f"method of {inst.extern}:", m,
                                         [md.name for md in edecl.methods if md.ret]))
                return None
            md = _overload(methods, len(call.args))
            tv = dict(zip(edecl.type_params, inst.type.args))
            if inst.extern == "register" and "I" not in tv:
                tv["I"] = Bits(32)
            if inst.extern in ("counter", "meter") and "I" not in tv:
                tv["I"] = Bits(32)
            tv.update(zip(md.type_params, targs))
            args = _typed_args(call, md.params, f"'{inst.extern}.{m}'", typer, env, tv,
                               edecl.type_params + md.type_params)
            if args is None:
                return None
            return CallInfo(CallKind.METHOD, m, inst, args, md.params, targs, call.pos)
        if sym is not None and sym.kind is SymKind.PACKET:
            pk = g.externs.get(str(sym.value))
            methods = [md for md in (pk.methods if pk else ()) if md.name == m]
            if not methods:
                typer.err(f.pos, unknown(f"method of {sym.value}:", m,
                                         [md.name for md in (pk.methods if pk else ())]))
                return None
            md = _overload(methods, len(call.args))
            tv = dict(zip(md.type_params, targs))
            args = _typed_args(call, md.params, f"'{sym.value}.{m}'", typer, env, tv,
                               md.type_params)
            if args is None:
                return None
            return CallInfo(CallKind.PACKET, m, sym.value, args, md.params, targs, call.pos)
    if m in ("isValid", "setValid", "setInvalid", "push_front", "pop_front"):
        tb = typer.expr(base, env)
        if tb is None:
            return None
        if isinstance(tb, TLoc) and isinstance(tb.ref, HeaderRef) and m != "push_front" \
                and m != "pop_front":
            if call.args:
                typer.err(call.pos, f"{m}() takes no arguments")
                return None
            return CallInfo(CallKind.HEADER, m, tb, (), (), (), call.pos)
        if isinstance(tb, TLoc) and isinstance(tb.ref, StackRef) and m in ("push_front",
                                                                             "pop_front"):
            if len(call.args) != 1 or call.args[0].value is None:
                typer.err(call.pos, f"{m} takes one argument (a count)")
                return None
            n = typer.expr(call.args[0].value, env)
            if n is None:
                return None
            if not isinstance(n, TConst):
                typer.err(call.args[0].pos, f"the count of {m} must be a compile-time constant")
                return None
            if env.block in env.g.parsers:
                # P4_16 / p4c: push_front and pop_front are for controls, not parsers.
                typer.err(f.pos, f"'{tb.text}.{m}': header stack method '{m}' cannot be used "
                                 f"in a parser")
                return None
            return CallInfo(CallKind.STACK, m, tb, (n,), (), (), call.pos)
        typer.err(f.pos, f"{show(tb.type)} has no method '{m}'")
        return None
    tb = typer.expr(base, env)
    if tb is not None:
        typer.err(f.pos, f"{show(tb.type)} has no method '{m}'")
    return None


def _overload(methods: list[A.MethodDecl], nargs: int) -> A.MethodDecl:
    for md in methods:
        if len(md.params) == nargs:
            return md
    return methods[0]
