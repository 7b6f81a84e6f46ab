"""CheckTypes: type-check every block before any code is generated.

Runs the lowering rules (the same Typer, call resolution and v1model placement checks the
generator uses) over everything into throw-away output — on a copy of the layout, so that
temporaries allocated while checking never reach the real scalars header — and then over the
actions no table or call uses, which the generator drops but whose errors must be reported.
"""
from __future__ import annotations

import copy

from . import ast as A
from .blocks import action_env, block_scope
from .diagnostics import Diagnostics
from .layout import Layout
from .lower_action import ActionLowering, LowerCtx
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
        ctx = LowerCtx(g, scratch, Typer(scratch, diags), diags)
        for role, decl in scratch.blocks.items():
            scope = block_scope(role, decl, scratch, g, Diagnostics())
            for act in scope.actions:
                if f"{decl.name}.{act.name}" not in emitted:
                    self._action(ctx, role, act, action_env(scope.env, act, g, diags))
        for name, act in g.actions.items():
            if name not in emitted:
                self._action(ctx, "ingress", act, action_env(Env(None, g), act, g, diags))

    @staticmethod
    def _action(ctx: LowerCtx, role: str, act: A.ActionDecl, env: Env) -> None:
        ActionLowering(ctx, role).lower_body(act.body.stmts, env)
