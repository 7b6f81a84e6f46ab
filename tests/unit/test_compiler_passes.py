"""The compiler's pass machinery: the shared traversal (netsum.p4c.visit)."""
from __future__ import annotations

from netsum.p4c import ast as A
from netsum.p4c.diagnostics import Diagnostics
from netsum.p4c.lexer import tokenize
from netsum.p4c.parser import parse
from netsum.p4c.visit import nested, nodes, rebuild


def _action(src: str) -> A.ActionDecl:
    """The one action declared in src (parsed only)."""
    d = Diagnostics()
    prog = parse(tokenize(src, "t.p4", d), d)
    assert not d.errors
    act, = (x for x in prog.decls if isinstance(x, A.ActionDecl))
    return act


def test_nodes_reaches_every_name_and_skips_annotation_arguments() -> None:
    act = _action('@x(g) action a(inout bit<8> v) { v = b[i] + f(c, d.e); }')
    names = sorted(n.name for n in nodes(act) if isinstance(n, A.Name))
    assert names == ["b", "c", "d", "f", "i", "v"]  # g is an annotation's argument
    assert "g" in {n.name for n in nodes(act, annotations=True) if isinstance(n, A.Name)}


def test_rebuild_replaces_top_down_and_keeps_unchanged_subtrees() -> None:
    act = _action("action a() { x = y + 1; z = 2; }")
    seen: list[str] = []

    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Name):
            seen.append(n.name)
            return A.Name(n.pos, "w") if n.name == "y" else None
        return None

    out = rebuild(act, visit)
    assert seen == ["x", "y", "z"]                           # source order, top-down
    first, second = out.body.stmts
    assert isinstance(first, A.Assign) and isinstance(first.rhs, A.Binary)
    assert isinstance(first.rhs.left, A.Name) and first.rhs.left.name == "w"
    assert second is act.body.stmts[1]                       # untouched: the same object
    assert first.lhs is act.body.stmts[0].lhs
    assert rebuild(act, lambda n: None) is act               # nothing replaced: no copy


def test_nested_lists_statements_at_every_depth_in_order() -> None:
    act = _action("action a() { if (x == 1) { y = 1; } else { exit; } "
                  "for (bit<8> i = 0; i < 2; i = i + 1) { return; } }")
    kinds = [type(s).__name__ for s in nested(act.body)]
    assert kinds == ["Block", "If", "Block", "Assign", "Block", "Exit", "For", "VarDecl",
                     "Assign", "Block", "Return"]
