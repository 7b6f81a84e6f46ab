"""CheckDropped: type-check the code the generator drops, so its errors are reported too.

GenerateJson lowers every block once, and its lowering is the type check of everything it
emits (the same Typer, call binding and v1model placement rules; errors are collected, not
raised, so one run reports them all).  What it drops -- actions no table or call uses and
tables no ``apply()`` reaches, as p4c drops them -- is never lowered there, yet a type error
in it is still an error.  This pass lowers exactly that code into throw-away output.

It runs after the document is assembled (it needs to know what was emitted), on the same
layout: temporaries it allocates land in the layout's scalars after the document's
``scalars`` list was written, so they never reach the output.
"""
from __future__ import annotations

from . import ast as A
from .blocks import action_env, block_scope, control_plane_name
from .diagnostics import Diagnostics
from .exprjson import Json
from .layout import Layout
from .lower_action import ActionLowering, LowerCtx
from .lower_table import TableLowering
from .model import ControlPlane
from .resolve import Globals
from .scopes import Env
from .typecheck import Typer

__all__ = ["CheckDropped"]


class CheckDropped:
    def run(self, g: Globals, lay: Layout, doc: Json, diags: Diagnostics) -> None:
        """Check what ``doc`` (GenerateJson's output for g and lay) left out."""
        emitted = {a["name"] for a in doc.get("actions", [])}
        applied = {t["name"] for p in doc.get("pipelines", []) for t in p["tables"]}
        ctx = LowerCtx(g, lay, Typer(lay, diags), diags)
        for role, decl in lay.blocks.items():
            scope = block_scope(role, decl, lay, g, Diagnostics())
            for act in scope.actions:
                if f"{decl.name}.{act.name}" not in emitted:
                    self._action(ctx, role, act, action_env(scope.env, act, g, diags, lay))
            unapplied = [t for t in scope.tables
                         if control_plane_name(scope.prefix, t) not in applied]
            if unapplied:
                actions: list[Json] = []
                tl = TableLowering(ctx, ControlPlane(), actions)
                tl.begin_control(scope, unapplied, [])
                for t in unapplied:
                    tl.table(t, scope.env)
        for name, act in g.actions.items():
            if name not in emitted:
                self._action(ctx, "ingress", act, action_env(Env(None, g), act, g, diags, lay))

    @staticmethod
    def _action(ctx: LowerCtx, role: str, act: A.ActionDecl, env: Env) -> None:
        ActionLowering(ctx, role).lower_body(act.body.stmts, env)
