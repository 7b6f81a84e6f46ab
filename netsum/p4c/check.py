"""CheckTypes: type-check every block before any code is generated.

Runs the lowering rules (the same Typer, call resolution and v1model placement checks the
generator uses) over everything into throw-away output — on a copy of the layout, so that
temporaries allocated while checking never reach the real scalars header — and then over the
actions no table or call uses and the tables no apply() reaches, which the generator drops
but whose errors must be reported.
"""
from __future__ import annotations

import copy

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

__all__ = ["CheckTypes"]


class CheckTypes:
    def run(self, g: Globals, lay: Layout, diags: Diagnostics) -> None:
        from .bmv2_json import GenerateJson  # the generator is this pass's engine

        # The AST is shared, not copied (it is immutable; only storage allocation differs).
        scratch = copy.deepcopy(lay, memo={id(d): d for d in lay.blocks.values()})
        doc, _ = GenerateJson().run(g, scratch, "<check>", diags)
        emitted = {a["name"] for a in doc.get("actions", [])}
        applied = {t["name"] for p in doc.get("pipelines", []) for t in p["tables"]}
        ctx = LowerCtx(g, scratch, Typer(scratch, diags), diags)
        for role, decl in scratch.blocks.items():
            scope = block_scope(role, decl, scratch, g, Diagnostics())
            for act in scope.actions:
                if f"{decl.name}.{act.name}" not in emitted:
                    self._action(ctx, role, act, action_env(scope.env, act, g, diags, scratch))
            # Tables no apply() reaches are dropped from the output but checked all the same.
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
                self._action(ctx, "ingress", act, action_env(Env(None, g), act, g, diags,
                                                                scratch))

    @staticmethod
    def _action(ctx: LowerCtx, role: str, act: A.ActionDecl, env: Env) -> None:
        ActionLowering(ctx, role).lower_body(act.body.stmts, env)
