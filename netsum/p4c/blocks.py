"""Scopes of the six V1Switch blocks: binds parameters to storage and declares block locals.

Control-plane names are computed here once: ``<Block>.<local>`` or the ``@name`` annotation
(a leading '.' makes it global), the names p4c puts in P4Info and the JSON.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field

from . import ast as A
from .diagnostics import Diagnostics, unknown
from .ir import ParamRef, TConst, TLoc
from .layout import ROLES, Layout, storable
from .resolve import ConstValue, Globals, const_eval, resolve_type
from .scopes import Env, ExternInstance, Sym, SymKind, ValueSet
from .types import Bits, Bool, EnumT, ExternT, HeaderT, StructT, show, width_of

__all__ = ["BlockScope", "SubControl", "block_scope", "control_plane_name", "action_env",
           "global_externs",
           "annotation_arg",
           "KNOWN_EXTERN_OBJECTS"]

KNOWN_EXTERN_OBJECTS = ("register", "counter", "direct_counter", "meter", "direct_meter",
                        "action_profile", "action_selector")


def annotation_arg(annos: tuple[A.Annotation, ...], name: str) -> A.Expr | None:
    for a in annos:
        if a.name == name and a.args:
            return a.args[0]
    return None


def has_annotation(annos: tuple[A.Annotation, ...], name: str) -> bool:
    return any(a.name == name for a in annos)


def control_plane_name(block: str, decl: A.Decl) -> str:
    arg = annotation_arg(decl.annotations, "name")
    if isinstance(arg, A.StrLit):
        return arg.value[1:] if arg.value.startswith(".") else f"{block}.{arg.value}" \
            if block else arg.value
    return f"{block}.{decl.name}" if block else decl.name


@dataclass(frozen=True, slots=True)
class SubControl:
    """``Inner() inner;`` inside a control: applied with ``inner.apply(args)`` and inlined."""

    decl: A.ControlDecl
    inst: A.Instantiation
    rank: tuple[int, ...] = ()  # the instance's place among the enclosing block's locals


@dataclass
class BlockScope:
    role: str
    decl: A.Decl
    env: Env
    prefix: str = ""  # control-plane name prefix: the block name, or "Outer.instance"
    # p4c lists P4Info objects in declaration order after inlining: V1Switch's blocks in
    # parameter order, each block's locals in order, a control instance's locals in place of
    # the instance.  rank is this block's position in that order; a local's is rank + (i,).
    rank: tuple[int, ...] = ()
    externs: list[ExternInstance] = field(default_factory=list)
    tables: list[A.TableDecl] = field(default_factory=list)
    actions: list[A.ActionDecl] = field(default_factory=list)
    value_sets: list[ValueSet] = field(default_factory=list)


def block_scope(role: str, decl: A.Decl, lay: Layout, g: Globals, diags: Diagnostics,
                prefix: str | None = None, bindings: dict[str, Sym] | None = None,
                rank: tuple[int, ...] | None = None) -> BlockScope:
    """The scope of a V1Switch block, or (with ``prefix``, ``bindings`` for its parameters
    and its ``rank``) of a control instance applied inside another control."""
    prefix = prefix or decl.name
    env = Env(None, g, prefix)
    scope = BlockScope(role, decl, env, prefix,
                       rank=rank if rank is not None else (ROLES.index(role),))
    params = decl.params if isinstance(decl, (A.ParserDecl, A.ControlDecl)) else ()
    if bindings is not None:
        for sym in bindings.values():
            env.add(sym)
        params = ()
    for p in params:
        pt = g.typed.declared(p.type, g, diags)
        if pt is None:
            continue
        if isinstance(pt, ExternT) and pt.name in ("packet_in", "packet_out"):
            env.add(Sym(SymKind.PACKET, p.name, pt.name))
            continue
        loc: TLoc | None = None
        if lay.sm_type is not None and pt == lay.sm_type:
            loc = lay.sm_loc
        elif lay.hdr_loc is not None and pt == lay.hdr_loc.type:
            loc = lay.hdr_loc
        elif lay.meta_loc is not None and pt == lay.meta_loc.type:
            loc = lay.meta_loc
        if loc is None:
            diags.error(p.pos, f"parameter '{p.name}' of '{decl.name}' has type {show(pt)}, "
                               "which does not match the V1Switch headers or metadata type")
            continue
        env.add(Sym(SymKind.VAR, p.name, TLoc(loc.type, p.pos, loc.ref, p.name)))
    locals_ = decl.locals if isinstance(decl, (A.ParserDecl, A.ControlDecl)) else ()
    for index, d in enumerate(locals_):
        if isinstance(d, A.Decl) and env.syms.get(d.name) is not None:
            diags.error(d.pos, f"re-declaration of '{d.name}' in '{decl.name}'")
            continue
        match d:
            case A.ConstDecl(type=t, value=v):
                tt = g.typed.declared(t, g, diags)
                cv = const_eval(v, g, diags, {n: _cv(s) for n, s in env.syms.items()
                                              if s.kind is SymKind.CONST})
                if tt is not None and cv is not None:
                    val = int(cv.value) & ((1 << tt.width) - 1) if isinstance(tt, Bits) \
                        else cv.value
                    env.add(Sym(SymKind.CONST, d.name, ConstValue(tt, val)))
            case A.VarDecl(type=t, name=n):
                tt = g.typed.declared(t, g, diags)
                if tt is not None and not storable(tt):
                    diags.error(d.pos, f"unsupported construct: a variable of type {show(tt)}")
                elif tt is not None:
                    env.add(Sym(SymKind.VAR, n, lay.alloc_local(n, tt, d.pos,
                                                                key=f"{prefix}/{n}")))
            case A.Instantiation(type=A.TypeName(name="value_set")) if \
                    isinstance(decl, A.ParserDecl):
                vs = _value_set(d, prefix, g, diags, scope.rank + (index,))
                if vs is not None:
                    scope.value_sets.append(vs)
                    env.add(Sym(SymKind.VALUE_SET, d.name, vs, vs.name))
            case A.Instantiation(type=A.TypeName(name=tn)) if tn in g.controls:
                sub = SubControl(g.controls[tn], d, scope.rank + (index,))
                env.add(Sym(SymKind.SUBCONTROL, d.name, sub, control_plane_name(prefix, d)))
            case A.Instantiation():
                inst = make_instance(d, prefix, g, diags, scope.rank + (index,))
                if inst is not None:
                    scope.externs.append(inst)
                    env.add(Sym(SymKind.EXTERN, d.name, inst, inst.name))
            case A.ActionDecl():
                scope.actions.append(d)
                env.add(Sym(SymKind.ACTION, d.name, d, control_plane_name(prefix, d)))
            case A.TableDecl():
                scope.tables.append(d)
                env.add(Sym(SymKind.TABLE, d.name, d, control_plane_name(prefix, d)))
    if isinstance(decl, A.ParserDecl):
        for st in decl.states:
            if st.name in env.syms or st.name in ("accept", "reject"):
                diags.error(st.pos, f"re-declaration of '{st.name}' in '{decl.name}'")
            env.add(Sym(SymKind.STATE, st.name, st))
    return scope


def _value_set(d: A.Instantiation, block: str, g: Globals, diags: Diagnostics,
               rank: tuple[int, ...]) -> ValueSet | None:
    t = d.type
    assert isinstance(t, A.TypeName)
    et = resolve_type(t.args[0], g, diags) if len(t.args) == 1 else None
    size = const_eval(d.args[0].value, g, diags) if len(d.args) == 1 and d.args[0].value \
        is not None else None
    if et is None or size is None:
        if len(t.args) != 1 or len(d.args) != 1:
            diags.error(d.pos, "value_set<T>(size) takes one type and one size")
        return None
    if not isinstance(size.value, int) or isinstance(size.value, bool) or \
            not 0 < size.value < 2 ** 31:
        # P4Info's ValueSet.size is an int32; a set needs room for at least one value
        diags.error(d.args[0].pos, "value_set size must be a positive integer below 2^31")
        return None
    fields: list[tuple[str, int, str]] = []
    if isinstance(et, StructT):
        for fname, ft in et.fields:
            if not isinstance(ft, (Bits, Bool, EnumT)):
                diags.error(d.pos, f"unsupported construct: value_set field '{fname}' of type "
                                   f"{show(ft)}")
                return None
            kind = annotation_arg(g.field_annotations.get((et.name, fname), ()), "match")
            fields.append((fname, width_of(ft), kind.name if isinstance(kind, A.Name)
                           else "exact"))
    elif isinstance(et, (Bits, Bool, EnumT)):
        fields.append(("", width_of(et), "exact"))
    else:
        diags.error(d.pos, f"unsupported construct: value_set of {show(et)}")
        return None
    return ValueSet(control_plane_name(block, d), tuple(fields), int(size.value), d, rank)


def global_externs(g: Globals, diags: Diagnostics) -> list[ExternInstance]:
    """Extern instances declared at file scope (``register<bit<8>>(2) gr;``), named without
    a block prefix; main and parser/control instantiations are not externs."""
    out: list[ExternInstance] = []
    for i, (name, d) in enumerate(g.instances.items()):
        t = d.type
        if name == "main" or not isinstance(t, A.TypeName) or t.name not in g.externs:
            continue
        inst = make_instance(d, "", g, diags, (-1, i))  # top-level blocks come before main's
        if inst is not None:
            out.append(inst)
    return out


def _cv(s: Sym) -> ConstValue:
    v = s.value
    if isinstance(v, TConst):
        return ConstValue(v.type, v.value)
    assert isinstance(v, ConstValue)
    return v


def make_instance(d: A.Instantiation, block: str, g: Globals, diags: Diagnostics,
                  rank: tuple[int, ...] = ()) -> ExternInstance | None:
    for _ in range(8):  # `typedef register<T> R;  R(n) r;` instantiates register<T>
        td = g.typedefs.get(d.type.name) if isinstance(d.type, A.TypeName) else None
        if td is None or not isinstance(td.type, A.TypeName):
            break
        d = dataclasses.replace(d, type=td.type)
    t = d.type
    tname = t.name if isinstance(t, A.TypeName) else "?"
    if tname not in g.externs:
        if tname in g.parsers or tname in g.controls:
            diags.error(d.pos, f"unsupported construct: instantiating {tname} here "
                               "(sub-parsers; sub-controls only inside controls)")
        else:
            diags.error(t.pos, unknown("extern type", tname, g.externs))
        return None
    if tname not in KNOWN_EXTERN_OBJECTS:
        diags.error(t.pos, f"unsupported construct: extern '{tname}' (supported: "
                           f"{', '.join(KNOWN_EXTERN_OBJECTS)})")
        return None
    et = resolve_type(t, g, diags)
    if not isinstance(et, ExternT):
        return None
    edecl = g.externs[tname]
    ctors = [m for m in edecl.methods if m.ret is None]
    if ctors and not any(len(c.params) == len(d.args) for c in ctors):
        diags.error(d.pos, f"{tname} takes {len(ctors[0].params)} constructor argument(s), "
                           f"got {len(d.args)}")
        return None
    args: list[ConstValue | None] = []
    for a in d.args:
        cv = const_eval(a.value, g, diags) if a.value is not None else None
        if cv is None:
            return None
        args.append(cv)
    if tname == "register":
        elem = et.args[0] if et.args else None
        if isinstance(elem, EnumT) and elem.underlying is not None:
            pass  # a serializable enum is stored as its underlying bits
        elif isinstance(elem, (StructT, HeaderT)):
            diags.error(t.pos, f"unsupported construct: a register of {show(elem)} (BMv2 "
                               "registers hold bit strings)")
            return None
        elif not isinstance(elem, Bits):
            diags.error(t.pos, "register needs an element type bit<W>, int<W> or a "
                               "serializable enum, e.g. register<bit<32>>(N)")
            return None
    if tname in ("register", "counter", "meter"):
        size = args[0]
        if size is not None and int(size.value) <= 0:
            diags.error(d.args[0].pos, f"{tname} size must be positive, got {size.value}")
            return None
        if size is not None and int(size.value) >> 32:
            # v1model declares the size `bit<32>`; P4Info's `size` is an int64 either way.
            diags.error(d.args[0].pos, f"value {size.value} does not fit in bit<32> "
                                       f"({tname} size)")
            return None
        if tname == "register" and size is not None and int(size.value) >> 31:
            diags.error(d.args[0].pos, f"register size {size.value} does not fit P4Info's "
                                       "int32 size (at most 2147483647)")
            return None
    return ExternInstance(control_plane_name(block, d), tname, et, tuple(args), d, block, rank)


def action_env(parent: Env, act: A.ActionDecl, g: Globals, diags: Diagnostics,
               layout: Layout | None = None) -> Env:
    """Env of an action called from a table: directionless parameters are runtime data.
    Directional parameters are bound by the caller (a direct call or the table's actions
    list, see lower_table); an action checked on its own (``layout`` given) gets a copy of
    each as storage, which is what the body works on under copy-in/copy-out."""
    env = parent.child()
    index = 0
    for p in act.params:
        pt = g.typed.declared(p.type, g, diags)
        if pt is None:
            continue
        if p.direction == "":
            env.add(Sym(SymKind.VAR, p.name, TLoc(pt, p.pos, ParamRef(index), p.name)))
            index += 1
            continue
        copy = layout.copy_of(p.name, pt, p.pos) if layout is not None else None
        env.add(Sym(SymKind.VAR, p.name, copy if copy is not None
                    else TLoc(pt, p.pos, ParamRef(-1), p.name)))
    return env
