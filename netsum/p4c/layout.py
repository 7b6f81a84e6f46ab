"""BuildLayout: where every piece of data lives in BMv2 — header instances and ``scalars``.

Reads the ``V1Switch`` instantiation to find the headers type H and user metadata type M.
H's fields become header instances (stacks become ``name[i]`` instances); M's fields and every
local variable become fields of the ``scalars`` metadata header, as p4c's bmv2 backend does.
Owns the name generator for generated scalars (``tmp``, ``tmp_0``, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ast as A
from .diagnostics import Diagnostics, NOPOS, Pos, unknown
from .ir import FieldRef, HeaderRef, StackRef, StructRef, TLoc, UnionRef, UnionStackRef
from .resolve import Globals, resolve_type
from .types import (Bits, Bool, EnumT, ErrorT, HeaderT, P4Type, StackT, StructT, UnionStackT,
                    UnionT,
                    VarbitT, show, width_of)

__all__ = ["Layout", "HeaderInstance", "BuildLayout", "ROLES", "NameGen", "storable"]

#: V1Switch's six blocks in parameter order.
ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


class NameGen:
    """p4c-style fresh names: 'tmp', then 'tmp_0', 'tmp_1', ... never reusing a taken name."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def new(self, base: str) -> str:
        if base not in self.used:
            self.used.add(base)
            return base
        i = 0
        while f"{base}_{i}" in self.used:
            i += 1
        name = f"{base}_{i}"
        self.used.add(name)
        return name


@dataclass(frozen=True, slots=True)
class HeaderInstance:
    name: str
    type: HeaderT
    metadata: bool


@dataclass
class Layout:
    blocks: dict[str, A.Decl] = field(default_factory=dict)  # role -> parser/control decl
    instances: list[HeaderInstance] = field(default_factory=list)
    stacks: list[tuple[str, StackT, list[str]]] = field(default_factory=list)
    unions: list[tuple[str, UnionT, list[str]]] = field(default_factory=list)
    union_stacks: list[tuple[str, UnionStackT, list[str]]] = field(default_factory=list)
    scalar_temps: list[tuple[str, int, bool]] = field(default_factory=list)
    scalar_locals: list[tuple[str, int, bool]] = field(default_factory=list)
    scalar_meta: list[tuple[str, int, bool]] = field(default_factory=list)
    hdr_loc: TLoc | None = None
    meta_loc: TLoc | None = None
    sm_loc: TLoc | None = None
    sm_type: StructT | None = None
    sm_header: HeaderT | None = None  # standard_metadata's BMv2 header type
    names: NameGen = field(default_factory=NameGen)
    local_slots: dict[str, TLoc] = field(default_factory=dict)  # variable key -> storage
    header_names: NameGen = field(default_factory=NameGen)
    # Extern instances declared at file scope (blocks.ExternInstance), visible in every block.
    global_externs: list[Any] = field(default_factory=list)

    def alloc_local(self, base: str, t: P4Type, pos: Pos, key: str | None = None) -> TLoc:
        """Storage for a variable (once per ``key``: its unique name, qualified by the control
        instance it belongs to) or, without a key, a temporary."""
        if key is not None and key in self.local_slots:
            return self.local_slots[key]
        loc = self._storage(base, t, pos, base, temp=key is None)
        if key is not None:
            self.local_slots[key] = loc
        return loc

    def copy_of(self, base: str, t: P4Type, pos: Pos) -> TLoc | None:
        """Fresh storage for a copy of a parameter (copy-in/copy-out), named after it; None
        for types BMv2 cannot hold in a copy."""
        if not storable(t):
            return None
        return self._storage(base, t, pos, base, temp=True)

    def _storage(self, base: str, t: P4Type, pos: Pos, text: str, temp: bool) -> TLoc:
        if isinstance(t, HeaderT):
            name = self.header_names.new(base)
            self.instances.append(HeaderInstance(name, t, False))
            return TLoc(t, pos, HeaderRef(name, t), text)
        if isinstance(t, UnionStackT):
            name = self.header_names.new(base)
            return self.union_stack(name, t, pos, text)
        if isinstance(t, UnionT):
            return self.union(self.header_names.new(base), t, pos, text)
        if isinstance(t, StackT):
            name = self.header_names.new(base)
            elems = [f"{name}[{i}]" for i in range(t.size)]
            for e in elems:
                self.header_names.used.add(e)
                self.instances.append(HeaderInstance(e, t.elem, False))
            self.stacks.append((name, t, elems))
            return TLoc(t, pos, StackRef(name, t), text)
        if isinstance(t, StructT) and t == self.sm_type and self.sm_header is not None:
            # A copy of standard_metadata is a metadata header of the same type (as p4c
            # makes it), so v1model primitives can take it where they take the original.
            name = self.header_names.new(base)
            self.instances.append(HeaderInstance(name, self.sm_header, True))
            members = tuple((fn, TLoc(ft, pos, FieldRef(name, fn), f"{text}.{fn}"))
                            for fn, ft in t.fields)
            return TLoc(t, pos, StructRef(t, members), text)
        if isinstance(t, StructT):
            members = tuple((fn, self._storage(f"{base}_{fn}", ft, pos, f"{text}.{fn}", temp))
                            for fn, ft in t.fields)
            return TLoc(t, pos, StructRef(t, members), text)
        if isinstance(t, VarbitT):
            # As p4c: a metadata header of its own (type `$varbit<N>`, one field `field`),
            # since a BMv2 header holds at most one variable-length field.
            name = self.header_names.new(base)
            vt = HeaderT(f"$varbit{t.max_width}", (("field", t),))
            self.instances.append(HeaderInstance(name, vt, True))
            return TLoc(t, pos, FieldRef(name, "field"), text)
        name = self.names.new(base)
        slot = (name, width_of(t), isinstance(t, Bits) and t.signed)
        (self.scalar_temps if temp else self.scalar_locals).append(slot)
        return TLoc(t, pos, FieldRef("scalars", name), text)

    def union(self, name: str, t: UnionT, pos: Pos, text: str) -> TLoc:
        """A header union instance: one header per member, named `name.member`."""
        names: list[str] = []
        members: list[tuple[str, TLoc]] = []
        for mname, mt in t.fields:
            assert isinstance(mt, HeaderT)  # ResolveNames allows only headers
            inst = f"{name}.{mname}"
            self.header_names.used.add(inst)
            self.instances.append(HeaderInstance(inst, mt, False))
            names.append(inst)
            members.append((mname, TLoc(mt, pos, HeaderRef(inst, mt), f"{text}.{mname}")))
        self.unions.append((name, t, names))
        return TLoc(t, pos, UnionRef(name, t, tuple(members)), text)

    def union_stack(self, name: str, t: UnionStackT, pos: Pos, text: str) -> TLoc:
        elems = tuple(self.union(f"{name}[{i}]", t.elem, pos, f"{text}[{i}]")
                      for i in range(t.size))
        self.union_stacks.append((name, t, [e.ref.name for e in elems
                                             if isinstance(e.ref, UnionRef)]))
        return TLoc(t, pos, UnionStackRef(name, t, elems), text)

    def temp(self, t: P4Type, pos: Pos) -> TLoc:
        return self._storage("tmp", t, pos, "tmp", temp=True)

    def scalar_fields(self) -> list[tuple[str, int, bool]]:
        # p4c's order: compiler temporaries, then declared locals, then user metadata.
        fields = [*self.scalar_temps, *self.scalar_locals, *self.scalar_meta]
        total = sum(w for _, w, _ in fields)
        if total % 8:
            fields.append((self.names.new("_padding"), 8 - total % 8, False))
        return fields


class BuildLayout:
    """Pass: Globals → Layout (reports a main that is not a V1Switch, unsupported shapes)."""

    def run(self, g: Globals, diags: Diagnostics) -> Layout:
        lay = Layout()
        lay.names.used.add("_padding")  # p4c's first scalar padding is '_padding_0'
        main = g.instances.get("main")
        if main is None:
            diags.error(NOPOS, "no 'main' package instantiation (expected V1Switch(...) main;)")
            return lay
        tname = main.type.name if isinstance(main.type, A.TypeName) else "?"
        if tname != "V1Switch":
            diags.error(main.type.pos, f"unsupported architecture package '{tname}': only "
                                       "v1model's V1Switch is supported")
            return lay
        if len(main.args) != len(ROLES):
            diags.error(main.pos, f"V1Switch takes {len(ROLES)} arguments, got {len(main.args)}")
            return lay
        args = self._by_position(main, g, diags)
        if args is None:
            return lay
        for role, arg in zip(ROLES, args):
            v = arg.value
            if not (isinstance(v, A.Call) and isinstance(v.func, A.Name)):
                diags.error(arg.pos, f"V1Switch argument '{role}' must be a parser or control "
                                     "instantiation like Name()")
                continue
            decl: A.ParserDecl | A.ControlDecl | None = \
                g.parsers.get(v.func.name) or g.controls.get(v.func.name)
            if decl is None:
                diags.error(v.pos, f"unknown parser or control '{v.func.name}'")
                continue
            want_parser = role == "parser"
            if want_parser != isinstance(decl, A.ParserDecl):
                diags.error(v.pos, f"V1Switch argument '{role}' must be a "
                                   f"{'parser' if want_parser else 'control'}")
                continue
            if not self._signature_ok(role, decl, g):
                ps = decl.params
                params = ", ".join(_param_text(p) for p in ps)
                diags.error(v.pos, f"V1Switch argument '{role}' must have the parameters "
                                   f"{_SIGNATURES[role]}; '{decl.name}' has ({params})")
                continue
            lay.blocks[role] = decl
        sm = g.types.get("standard_metadata_t")
        if isinstance(sm, StructT):
            lay.sm_type = sm
            sm_header = HeaderT("standard_metadata", tuple(
                (n, Bits(width_of(t))) for n, t in sm.fields) + ((("_padding", Bits(3)),)
                                                                  if _pad(sm) else ()))
            lay.sm_header = sm_header
            lay.instances.append(HeaderInstance("standard_metadata", sm_header, True))
            lay.header_names.used.add("standard_metadata")
            members = tuple((n, TLoc(t, NOPOS, FieldRef("standard_metadata", n), n))
                            for n, t in sm.fields)
            lay.sm_loc = TLoc(sm, NOPOS, StructRef(sm, members), "standard_metadata")
        parser = lay.blocks.get("parser")
        if isinstance(parser, A.ParserDecl) and len(parser.params) == 4:
            h = resolve_type(parser.params[1].type, g, diags)
            m = resolve_type(parser.params[2].type, g, diags)
            if isinstance(h, StructT):
                lay.hdr_loc = self._headers(h, lay, diags, parser.params[1].pos)
            elif h is not None:
                diags.error(parser.params[1].pos, f"headers type {show(h)} must be a struct")
            if isinstance(m, StructT):
                lay.meta_loc = self._metadata(m, m.name, lay, diags, parser.params[2].pos)
            elif m is not None:
                diags.error(parser.params[2].pos, f"metadata type {show(m)} must be a struct")
        elif parser is not None:
            diags.error(parser.pos, "the V1Switch parser must have 4 parameters "
                                    "(packet_in, out H, inout M, inout standard_metadata_t)")
        return lay

    @staticmethod
    def _by_position(main: A.Instantiation, g: Globals,
                     diags: Diagnostics) -> list[A.Arg] | None:
        """V1Switch's arguments in parameter order (they may be given by name)."""
        if not any(a.name for a in main.args):
            return list(main.args)
        pkg = g.blocks.get("V1Switch")
        names = [p.name for p in pkg.params] if isinstance(pkg, A.PackageDecl) else []
        if len(names) != len(ROLES):
            diags.error(main.pos, "V1Switch's declaration does not have six parameters")
            return None
        if not all(a.name for a in main.args):
            diags.error(main.pos, "V1Switch arguments must be all positional or all named")
            return None
        by_name: dict[str, A.Arg] = {}
        for a in main.args:
            if a.name not in names:
                diags.error(a.pos, unknown("parameter of V1Switch:", a.name or "?", names))
                return None
            if a.name in by_name:
                diags.error(a.pos, f"V1Switch argument '{a.name}' given twice")
                return None
            by_name[a.name] = a
        return [by_name[n] for n in names]

    @staticmethod
    def _signature_ok(role: str, decl: A.ParserDecl | A.ControlDecl, g: Globals) -> bool:
        params = decl.params
        want = _SIGNATURES[role].count(",") + 1
        if len(params) != want:
            return False
        first = params[0].type
        first_name = first.name if isinstance(first, A.TypeName) else ""
        if role == "parser":
            return first_name == "packet_in"
        if role == "deparser":
            return first_name == "packet_out"
        return first_name not in ("packet_in", "packet_out")

    def _headers(self, t: StructT, lay: Layout, diags: Diagnostics, pos: Pos,
                 prefix: str = "") -> TLoc:
        members: list[tuple[str, TLoc]] = []
        for fname, ft in t.fields:
            name = prefix + fname
            if isinstance(ft, HeaderT):
                lay.header_names.used.add(name)
                lay.instances.append(HeaderInstance(name, ft, False))
                members.append((fname, TLoc(ft, pos, HeaderRef(name, ft), name)))
            elif isinstance(ft, StackT):
                elems = [f"{name}[{i}]" for i in range(ft.size)]
                for e in elems:
                    lay.header_names.used.add(e)
                    lay.instances.append(HeaderInstance(e, ft.elem, False))
                lay.stacks.append((name, ft, elems))
                members.append((fname, TLoc(ft, pos, StackRef(name, ft), name)))
            elif isinstance(ft, StructT):
                members.append((fname, self._headers(ft, lay, diags, pos, name + ".")))
            elif isinstance(ft, UnionT):
                # One header instance per member, named `u.member`, tied by a header_unions
                # entry (BMv2 keeps at most one member valid).
                lay.header_names.used.add(name)
                members.append((fname, lay.union(name, ft, pos, name)))
            elif isinstance(ft, UnionStackT):
                lay.header_names.used.add(name)
                members.append((fname, lay.union_stack(name, ft, pos, name)))
            else:
                diags.error(pos, f"field '{fname}' of the headers struct has type {show(ft)}; "
                                 "only headers, header stacks and structs of them are allowed")
        return TLoc(t, pos, StructRef(t, tuple(members)), prefix.rstrip(".") or "hdr")

    def _metadata(self, t: StructT, prefix: str, lay: Layout, diags: Diagnostics,
                  pos: Pos) -> TLoc:
        members: list[tuple[str, TLoc]] = []
        for fname, ft in t.fields:
            name = f"{prefix}.{fname}"
            if isinstance(ft, (Bits, Bool, ErrorT, EnumT, VarbitT)):
                lay.names.used.add(name)
                lay.scalar_meta.append((name, width_of(ft), isinstance(ft, Bits) and ft.signed))
                members.append((fname, TLoc(ft, pos, FieldRef("scalars", name), name)))
            elif isinstance(ft, StructT):
                members.append((fname, self._metadata(ft, name, lay, diags, pos)))
            elif isinstance(ft, HeaderT):
                hname = lay.header_names.new(fname)
                lay.instances.append(HeaderInstance(hname, ft, False))
                members.append((fname, TLoc(ft, pos, HeaderRef(hname, ft), hname)))
            elif isinstance(ft, (StackT, UnionT, UnionStackT)):
                members.append((fname, lay._storage(fname, ft, pos, fname, temp=False)))
            else:
                diags.error(pos, f"unsupported construct: metadata field '{fname}' of type "
                                 f"{show(ft)}")
        return TLoc(t, pos, StructRef(t, tuple(members)), prefix)


def storable(t: P4Type) -> bool:
    """Whether a variable (or a parameter's copy) of type t has a place in BMv2's layout."""
    if isinstance(t, StructT):
        return all(storable(ft) for _, ft in t.fields)
    return isinstance(t, (Bits, Bool, ErrorT, EnumT, HeaderT, StackT, UnionT, UnionStackT,
                          VarbitT))


_SIGNATURES = {
    "parser": "(packet_in, out H, inout M, inout standard_metadata_t)",
    "verify_checksum": "(inout H, inout M)",
    "ingress": "(inout H, inout M, inout standard_metadata_t)",
    "egress": "(inout H, inout M, inout standard_metadata_t)",
    "compute_checksum": "(inout H, inout M)",
    "deparser": "(packet_out, in H)",
}


def _param_text(p: A.Param) -> str:
    t = p.type
    tname = t.name if isinstance(t, A.TypeName) else type(t).__name__
    return f"{p.direction + ' ' if p.direction else ''}{tname} {p.name}"


def _pad(sm: StructT) -> bool:
    return sum(width_of(t) for _, t in sm.fields) % 8 != 0
