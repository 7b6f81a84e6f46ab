"""GenerateJson: assemble the BMv2 JSON document (format 2.23) from the lowered pieces.

Section order and object shapes follow p4c's bmv2 backend.  Order of work matters: the
pipelines are lowered before the scalars header is written (lowering allocates temporaries),
and the compute-checksum control before the verify one (p4c numbers their calculations so).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import ast as A
from .blocks import BlockScope, annotation_arg, block_scope, global_externs
from .diagnostics import Diagnostics
from .exprjson import Json
from .layout import Layout, NameGen
from .lower_action import LowerCtx
from .lower_control import ControlLowering, PipelineState
from .lower_parser import lower_checksums, lower_deparser, lower_parser
from .lower_profile import PROFILE_EXTERNS
from .lower_table import TableLowering, annotation_strings, explicit_id
from .newtypes import new_type_of, p4runtime_width
from .model import ControllerHeaderModel
from .model import (ControlPlane, CounterModel, DigestModel, MeterModel, RegisterModel,
                    ValueSetModel)
from .resolve import Globals
from .scopes import ExternInstance
from .typecheck import Typer
from .types import Bits, Bool, EnumT, ErrorT, HeaderT, P4Type, VarbitT, width_of

__all__ = ["GenerateJson"]

_COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}


class GenerateJson:
    """Pass: (Globals, Layout) → (BMv2 JSON dict, ControlPlane model)."""

    def run(self, g: Globals, lay: Layout, filename: str,
            diags: Diagnostics) -> tuple[Json, ControlPlane]:
        typer = Typer(lay, diags)
        ctx = LowerCtx(g, lay, typer, diags)
        cp = ControlPlane()
        lay.global_externs = global_externs(g, diags)
        g.extern_objects = {inst.decl.name: inst for inst in lay.global_externs}
        scopes = {role: block_scope(role, decl, lay, g, diags)
                  for role, decl in lay.blocks.items()}
        parser = lower_parser(ctx, scopes["parser"]) if "parser" in scopes else None
        ps = PipelineState()
        tl = TableLowering(ctx, cp, ps.actions)
        pipelines: list[Json] = []
        for pid, role in enumerate(("ingress", "egress")):
            if role in scopes:
                pipelines.append(ControlLowering(ctx, scopes[role], ps, tl).run(role, pid))
        cknames = NameGen()
        checksums: list[Json] = []
        for role, verify in (("compute_checksum", False), ("verify_checksum", True)):
            if role in scopes:
                checksums += lower_checksums(ctx, scopes[role], verify, cknames)
        for i, c in enumerate(checksums):
            c["id"] = i
        deparser = lower_deparser(ctx, scopes["deparser"]) if "deparser" in scopes else None
        counters, meters, registers = self._externs(scopes, tl, ctx, cp)
        self._controller_headers(g, lay, cp)
        cp.extern_functions = ctx.extern_functions
        cp.action_profiles = tl.profile_set().models(annotation_strings)
        for vs in (scopes["parser"].value_sets if "parser" in scopes else []):
            cp.value_sets.append(ValueSetModel(
                vs.name, vs.fields, vs.size, annotation_strings(vs.decl.annotations),
                explicit_id(vs.decl.annotations), vs.rank))
        for name, st in ctx.digests.items():
            cp.digests.append(DigestModel(name, tuple(
                (n, width_of(t), self._member_spec(name, n, t, g, cp)) for n, t in st.fields),
                name in ctx.tuple_digests.values()))
        doc: dict[str, Any] = {
            "header_types": self._header_types(lay),
            "headers": self._headers(lay),
            "header_stacks": [
                {"name": n, "id": i, "size": st.size, "header_type": st.elem.name,
                 "header_ids": [self._header_id(lay, e) for e in elems]}
                for i, (n, st, elems) in enumerate(lay.stacks)],
            "header_union_types": self._union_types(lay),
            "header_unions": [
                {"name": n, "id": i, "union_type": ut.name,
                 "header_ids": [self._header_id(lay, m) for m in members]}
                for i, (n, ut, members) in enumerate(lay.unions)],
            "header_union_stacks": [
                {"name": n, "id": i, "size": ut.size, "union_type": ut.elem.name,
                 "header_union_ids": [[u[0] for u in lay.unions].index(m) for m in unions]}
                for i, (n, ut, unions) in enumerate(lay.union_stacks)],
            "field_lists": ctx.field_lists,
            "errors": [[e, i] for i, e in enumerate(g.errors)],
            "enums": [],
            "parsers": [parser] if parser else [],
            "parse_vsets": [
                {"name": vs.name, "id": i, "compressed_bitwidth": sum(w for _, w, _ in vs.fields),
                 "max_size": vs.size}
                for i, vs in enumerate(scopes["parser"].value_sets if "parser" in scopes else [])],
            "deparsers": [deparser] if deparser else [],
            "meter_arrays": meters,
            "counter_arrays": counters,
            "register_arrays": registers,
            "calculations": ctx.calculations,
            "learn_lists": ctx.learn_lists,
            "actions": ps.actions,
            "pipelines": pipelines,
            "checksums": checksums,
            "force_arith": [],
            "extern_instances": [],
            "field_aliases": self._aliases(g, lay),
            "program": Path(filename).name,
            "__meta__": {"version": [2, 23], "compiler": "https://github.com/p4lang/p4c"},
        }
        return doc, cp

    @staticmethod
    def _header_types(lay: Layout) -> list[Json]:
        out: list[Json] = [{"name": "scalars_0", "id": 0, "fields": [
            [n, w, s] for n, w, s in lay.scalar_fields()]}]
        seen: set[str] = set()
        for inst in lay.instances:
            if inst.type.name in seen:
                continue
            seen.add(inst.type.name)
            ht: Json = {"name": inst.type.name, "id": len(out), "fields": [
                [n, "*"] if isinstance(t, VarbitT) else
                [n, width_of(t), isinstance(t, Bits) and t.signed] for n, t in inst.type.fields]}
            if any(isinstance(t, VarbitT) for _, t in inst.type.fields):
                # The header's largest size in bytes (a varbit field counts its maximum).
                ht["max_length"] = sum(width_of(t) for _, t in inst.type.fields) // 8
            out.append(ht)
        return out

    @staticmethod
    def _union_types(lay: Layout) -> list[Json]:
        out: list[Json] = []
        for _, ut, _ in lay.unions:
            if all(u["name"] != ut.name for u in out):
                out.append({"name": ut.name, "id": len(out),
                            "headers": [[m, t.name] for m, t in ut.fields
                                        if isinstance(t, HeaderT)]})
        return out

    @staticmethod
    def _headers(lay: Layout) -> list[Json]:
        out: list[Json] = [{"name": "scalars", "id": 0, "header_type": "scalars_0",
                            "metadata": True, "pi_omit": True}]
        for inst in lay.instances:
            out.append({"name": inst.name, "id": len(out), "header_type": inst.type.name,
                        "metadata": inst.metadata, "pi_omit": True})
        return out

    @staticmethod
    def _header_id(lay: Layout, name: str) -> int:
        for i, inst in enumerate(lay.instances):
            if inst.name == name:
                return i + 1
        return -1

    @staticmethod
    def _aliases(g: Globals, lay: Layout) -> list[list[Any]]:
        """[alias, [header, field]] pairs (BMv2's field_aliases are lists, not objects)."""
        out: list[list[Any]] = []
        if lay.sm_type is None:
            return out
        for fname, _ in lay.sm_type.fields:
            arg = annotation_arg(g.field_annotations.get(("standard_metadata_t", fname), ()),
                                 "alias")
            if isinstance(arg, A.StrLit):
                out.append([arg.value, ["standard_metadata", fname]])
        return out

    def _externs(self, scopes: dict[str, BlockScope], tl: TableLowering, ctx: LowerCtx,
                 cp: ControlPlane) -> tuple[list[Json], list[Json], list[Json]]:
        counters: list[Json] = []
        meters: list[Json] = []
        registers: list[Json] = []
        blocks = [scopes[r] for r in ("parser", "verify_checksum", "ingress", "egress",
                                      "compute_checksum") if r in scopes]
        for inst in ctx.layout.global_externs:
            self._extern(inst, tl, ctx, cp, counters, meters, registers)
        seen: set[str] = set()
        for scope in blocks + ctx.sub_scopes:
            for inst in scope.externs:
                if inst.name not in seen:  # a control instance applied twice shares its own
                    seen.add(inst.name)
                    self._extern(inst, tl, ctx, cp, counters, meters, registers)
        for inst in tl.inline_externs:
            if inst.name not in seen:
                seen.add(inst.name)
                self._extern(inst, tl, ctx, cp, counters, meters, registers)
        return counters, meters, registers

    def _extern(self, inst: ExternInstance, tl: TableLowering, ctx: LowerCtx, cp: ControlPlane,
                counters: list[Json], meters: list[Json], registers: list[Json]) -> None:
        annos = inst.decl.annotations
        strs = annotation_strings(annos)
        eid = explicit_id(annos)
        g = ctx.g

        def member(i: int, enum_name: str) -> str:
            cv = inst.args[i] if i < len(inst.args) else None
            et = g.types.get(enum_name)
            if cv is None or not isinstance(et, EnumT):
                return ""
            return et.members[int(cv.value)]

        if inst.extern in ("counter", "direct_counter"):
            direct = inst.extern == "direct_counter"
            unit = member(0 if direct else 1, "CounterType")
            binding = tl.direct_bindings.get(inst.name)
            if direct and binding is None:
                ctx.diags.warning(inst.decl.pos, f"direct_counter '{inst.name}' is not attached "
                                                 "to any table")
                return
            size = 0 if direct else int(inst.args[0].value) if inst.args[0] else 0
            j: Json = {"name": inst.name, "id": len(counters)}
            if direct:
                j.update({"is_direct": True, "binding": binding})
            else:
                j.update({"size": size, "is_direct": False})
            counters.append(j)
            cp.counters.append(CounterModel(inst.name, _COUNTER_UNITS.get(unit, "BOTH"), size,
                                            binding if direct else None, strs, eid, inst.rank))
        elif inst.extern in ("meter", "direct_meter"):
            direct = inst.extern == "direct_meter"
            unit = member(0 if direct else 1, "MeterType")
            binding = tl.direct_bindings.get(inst.name)
            if direct and binding is None:
                ctx.diags.warning(inst.decl.pos, f"direct_meter '{inst.name}' is not attached "
                                                 "to any table")
                return
            size = int(inst.args[0].value) if not direct and inst.args[0] else 0
            j = {"name": inst.name, "id": len(meters), "is_direct": direct,
                 "size": size if not direct else _table_size(tl, binding), "rate_count": 2,
                 "type": unit or "packets"}
            if direct:
                j["binding"] = binding
                tgt = ctx.direct_meter_targets.get(inst.name)
                j["result_target"] = [tgt.header, tgt.field] if tgt else None
            meters.append(j)
            cp.meters.append(MeterModel(inst.name, (unit or "packets").upper(), j["size"],
                                        binding if direct else None, strs, eid, inst.rank))
        elif inst.extern in PROFILE_EXTERNS:
            tl.profile_set().instance(inst)  # in P4Info even when no table uses it
        elif inst.extern == "register":
            et = inst.type.args[0]
            enum = ""
            if isinstance(et, EnumT) and et.underlying is not None:
                cp.add_enum(et)
                enum, et = et.name, et.underlying
            assert isinstance(et, Bits)
            size = int(inst.args[0].value) if inst.args[0] else 0
            registers.append({"name": inst.name, "id": len(registers), "size": size,
                              "bitwidth": et.width})
            cp.registers.append(RegisterModel(inst.name, et.width, et.signed, size, strs, eid,
                                              inst.rank, enum))

    @classmethod
    def _member_spec(cls, struct: str, member: str, t: P4Type, g: Globals,
                     cp: ControlPlane) -> str:
        """A digest member declared with a `type` is named as that new type (p4c)."""
        nt = new_type_of(g.field_types.get((struct, member)), g)
        if nt is not None:
            cp.new_types.setdefault(nt.name, nt)
            return f"new_type:{nt.name}"
        return cls._spec(t, g, cp)

    @staticmethod
    def _spec(t: P4Type, g: Globals, cp: ControlPlane) -> str:
        """A digest member's P4Info type spec (DigestModel.fields), recording the enum and
        error types P4Info's type_info must then describe."""
        if isinstance(t, Bool):
            return "bool"
        if isinstance(t, ErrorT):
            cp.errors = tuple(g.errors)
            return "error"
        if isinstance(t, EnumT):
            if t.underlying is not None:
                cp.add_enum(t)
                return f"serializable_enum:{t.name}"
            cp.plain_enums[t.name] = t.members
            return f"enum:{t.name}"
        return "int" if isinstance(t, Bits) and t.signed else "bit"

    @staticmethod
    def _controller_headers(g: Globals, lay: Layout, cp: ControlPlane) -> None:
        used = {inst.type.name for inst in lay.instances}
        for tname in g.header_order:
            annos = g.decl_annotations.get(tname, ())
            arg = annotation_arg(annos, "controller_header")
            t = g.types.get(tname)
            if isinstance(arg, A.StrLit) and isinstance(t, HeaderT) and tname in used:
                types = [new_type_of(g.field_types.get((tname, n)), g) for n, _ft in t.fields]
                for nt in types:
                    if nt is not None:
                        cp.new_types.setdefault(nt.name, nt)
                cp.controller_headers.append(ControllerHeaderModel(
                    arg.value, tname, tuple((n, p4runtime_width(nt, width_of(ft)))
                                            for (n, ft), nt in zip(t.fields, types)),
                    annotation_strings(annos), tuple(nt.name if nt else "" for nt in types)))


def _table_size(tl: TableLowering, binding: str | None) -> int:
    for t in tl.cp.tables:
        if t.name == binding:
            return t.size
    return 1024
