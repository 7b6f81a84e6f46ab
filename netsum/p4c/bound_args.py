"""BindActionListCalls: an action bound in a table's `actions` list to arguments that call a
function (`a2(bump_val(x), bump_val(x))`, p4c's issue2321) evaluates them each time the action
runs, left to right, before its body: the action gets them as local variables initialized at
its start (p4c's midend inlines them the same way: a2 takes no parameters, its body first
computes both calls).  Later passes expand the calls like any other.

Only `in` parameters bound this way, of an action named nowhere else in its control (a
`default_action` or entry naming it again would bind the same calls again), are rewritten;
anything else is left for the lowering to report.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import ast as A
from .diagnostics import Diagnostics
from .visit import nodes

__all__ = ["BindActionListCalls"]


class BindActionListCalls:
    """Pass: Program → Program whose actions lists bind no function calls."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.functions = {d.name for d in prog.decls if isinstance(d, A.FunctionDecl)}
        if not self.functions:
            return prog
        return A.Program(prog.pos, tuple(self._control(d) if isinstance(d, A.ControlDecl)
                                         else d for d in prog.decls))

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        actions = {x.name: x for x in c.locals if isinstance(x, A.ActionDecl)}
        rewritten: dict[str, A.ActionDecl] = {}
        locals_: list[A.Node] = []
        for x in c.locals:
            if isinstance(x, A.TableDecl):
                x = self._table(x, actions, c, rewritten)
            locals_.append(x)
        if not rewritten:
            return c
        return dataclasses.replace(c, locals=tuple(
            rewritten.get(x.name, x) if isinstance(x, A.ActionDecl) else x for x in locals_))

    def _table(self, t: A.TableDecl, actions: dict[str, A.ActionDecl], c: A.ControlDecl,
               rewritten: dict[str, A.ActionDecl]) -> A.TableDecl:
        props: list[A.TableProperty] = []
        for p in t.properties:
            if p.name == "actions" and isinstance(p.value, tuple):
                entries = []
                for annos, call in p.value:
                    a = actions.get(call.func.name) if isinstance(call.func, A.Name) else None
                    if a is not None and call.args and self._calls(call.args) and \
                            _uses(c, a.name) == 1 and len(call.args) <= len(a.params) and \
                            all(pr.direction == "in" for pr in a.params[:len(call.args)]) and \
                            all(arg.value is not None and not arg.name for arg in call.args):
                        rewritten[a.name] = _bind(a, call.args)
                        call = dataclasses.replace(call, args=())
                    entries.append((annos, call))
                p = dataclasses.replace(p, value=tuple(entries))
            props.append(p)
        return dataclasses.replace(t, properties=tuple(props))

    def _calls(self, roots: Any) -> bool:
        """Whether a call of a program function occurs in roots."""
        return any(isinstance(n, A.Call) and isinstance(n.func, A.Name) and
                   n.func.name in self.functions for n in nodes(roots))


def _bind(a: A.ActionDecl, args: tuple[A.Arg, ...]) -> A.ActionDecl:
    bound = a.params[:len(args)]
    prologue = tuple(A.VarDecl(arg.pos, (), p.type, p.name, arg.value)
                     for p, arg in zip(bound, args))
    return dataclasses.replace(a, params=a.params[len(args):], body=dataclasses.replace(
        a.body, stmts=prologue + a.body.stmts))


def _uses(c: A.ControlDecl, name: str) -> int:
    """How many times a control's locals and apply block name `name`."""
    return sum(isinstance(n, A.Name) and n.name == name for n in nodes((c.locals, c.apply)))
