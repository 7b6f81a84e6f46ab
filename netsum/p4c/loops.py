"""CheckLoops: where ``for``, ``break`` and ``continue`` may stand, checked once after parsing.

P4_16 1.2.5 ``for (init; cond; update)`` loops are compiled the way p4c's BMv2 back end
compiles them (``backends/bmv2/common/action.cpp``): inside an action (or a group of
statements of an ``apply`` block, which becomes a hidden action) as primitives with a
backward ``_jump``; ``break`` and ``continue`` jump to the loop's end and to its update.
Nothing is unrolled: a bound the packet controls needs the loop at run time anyway, and
netsum-switch (like BMv2) runs backward jumps, with a step limit per action call.

Refused here, each by name, before any other pass sees them:

* ``for (T x in ...)``: p4c-bm2-ss rejects it too ("BMV2 does not support for-in loops").
* A loop in a parser state: BMv2 parsers have no loops inside a state (states loop through
  transitions).
* ``break``/``continue`` outside a loop (an error in P4 itself).

The other place a loop is refused is the control lowering: a loop whose body applies a table
or a control (BMv2's control graph is acyclic), or returns from the ``apply`` block.
"""
from __future__ import annotations

from . import ast as A
from .diagnostics import Diagnostics
from .visit import statements

__all__ = ["CheckLoops"]


class CheckLoops:
    """Pass: reads the Program, reports misplaced loops and loop jumps."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        for d in prog.decls:
            self._decl(d)
        return prog

    def _decl(self, d: A.Node) -> None:
        match d:
            case A.ControlDecl():
                for x in d.locals:
                    self._decl(x)
                self._stmt(d.apply, 0)
            case A.ActionDecl():
                self._stmt(d.body, 0)
            case A.FunctionDecl(body=A.Block() as b):
                self._stmt(b, 0)
            case A.ParserDecl():
                for st in d.states:
                    for s in st.stmts:
                        self._parser_stmt(s)

    def _parser_stmt(self, s: A.Stmt) -> None:
        if isinstance(s, (A.For, A.ForIn)):
            self.diags.error(s.pos, "unsupported construct: a for loop in a parser state "
                                    "(BMv2 parsers loop through state transitions only)")
            return
        self._stmt(s, 0)

    def _stmt(self, s: A.Stmt, depth: int) -> None:
        match s:
            case A.Break() | A.Continue() if depth == 0:
                word = "break" if isinstance(s, A.Break) else "continue"
                self.diags.error(s.pos, f"{word} statement outside of a loop")
            case A.ForIn():
                self.diags.error(s.pos, "unsupported construct: a for-in loop (p4c's BMv2 back "
                                        "end rejects it too: BMv2 does not support for-in "
                                        "loops)")
            case A.For(init=i, update=u, body=b):
                for x in i + u:
                    self._stmt(x, depth)
                self._stmt(b, depth + 1)
            case _:
                for x in statements(s):
                    self._stmt(x, depth)
