"""CreateBuiltins: the implicit parts of a program made explicit (p4c's pass of that name).

* A table without ``default_action`` gets ``default_action = NoAction();`` (not const), and
  ``NoAction`` joins its actions, annotated ``@defaultonly``, unless it is listed already.
* A parser state without a ``transition`` transitions to ``reject`` (with p4c's warning).
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics

__all__ = ["CreateBuiltins"]


class CreateBuiltins:
    """Pass: Program → Program."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        return A.Program(prog.pos, tuple(self._decl(d) for d in prog.decls))

    def _decl(self, d: A.Node) -> A.Node:
        if isinstance(d, A.ControlDecl):
            return dataclasses.replace(d, locals=tuple(
                self._table(x) if isinstance(x, A.TableDecl) else x for x in d.locals))
        if isinstance(d, A.ParserDecl):
            return dataclasses.replace(d, states=tuple(self._state(s) for s in d.states))
        return d

    def _state(self, st: A.ParserState) -> A.ParserState:
        if st.transition is not None:
            return st
        self.diags.warning(st.pos, f"{st.name}: implicit transition to `reject'")
        return dataclasses.replace(st, transition="reject", transition_pos=st.pos)

    @staticmethod
    def _table(t: A.TableDecl) -> A.TableDecl:
        if any(p.name == "default_action" for p in t.properties):
            return t
        props: list[A.TableProperty] = []
        noaction = A.Call(t.pos, A.Name(t.pos, "NoAction"), (), ())
        for p in t.properties:
            if p.name == "actions" and isinstance(p.value, tuple):
                listed = any(isinstance(c.func, A.Name) and c.func.name == "NoAction"
                             for _, c in p.value)
                if not listed:
                    only = (A.Annotation(t.pos, "defaultonly", (), ""),)
                    p = dataclasses.replace(p, value=p.value + ((only, noaction),))
            props.append(p)
        props.append(A.TableProperty(t.pos, "default_action", False, noaction))
        return dataclasses.replace(t, properties=tuple(props))
