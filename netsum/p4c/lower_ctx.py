"""State shared by every lowering step of one program, and small primitive helpers.

:class:`LowerCtx` collects what sections of the BMv2 JSON other than actions and pipelines
need (calculations, field lists, learn lists, direct meter targets) and the name generator
for hidden objects; it is passed explicitly, never global.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .diagnostics import Diagnostics
from .exprjson import Json, lower_expr, wrap
from .ir import FieldRef, TExpr
from .layout import Layout, NameGen
from .resolve import Globals
from .typecheck import Typer
from .types import StructT

__all__ = ["LowerCtx", "prim", "as_param_b2d"]


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
    #: digest calls on a list without a struct type: (file, line, column) -> digest_<n>
    tuple_digests: dict[tuple[str, int, int], str] = field(default_factory=dict)
    direct_meter_targets: dict[str, FieldRef] = field(default_factory=dict)
    names: NameGen = field(default_factory=NameGen)
    sub_scopes: list[Any] = field(default_factory=list)  # BlockScopes of control instances
    extern_functions: bool = False  # an extern function is called in a control (P4Info)

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


def prim(op: str, params: list[Json]) -> Json:
    p: dict[str, Any] = {"op": op, "parameters": params}
    return p


def as_param_b2d(cond: TExpr) -> Json:
    """A bool condition as a data primitive parameter: b2d(cond), wrapped twice."""
    return {"type": "expression", "value": wrap("b2d", None, lower_expr(cond))}

