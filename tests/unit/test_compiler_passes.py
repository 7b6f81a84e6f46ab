"""The compiler's pass machinery: the shared traversal (netsum.p4c.visit) and the type check
that is the lowering itself, run once, with the code the generator drops checked in the same
pass (netsum.p4c.check)."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.p4c import ast as A
from netsum.p4c.bmv2_json import GenerateJson
from netsum.p4c.diagnostics import Diagnostics
from netsum.p4c.lexer import tokenize
from netsum.p4c.parser import parse
from netsum.p4c.visit import nested, nodes, rebuild

ROOT = Path(__file__).resolve().parents[2]

HEAD = """
#include <core.p4>
#include <v1model.p4>
header p_t { bit<8> a; bit<8> b; }
struct headers { p_t p; }
struct metadata { bit<8> x; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.p); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.p); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


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


def test_the_json_is_generated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The type check is the lowering, run once: no hidden second generation (issue 26)."""
    runs: list[int] = []
    real = GenerateJson.run

    def counted(self: GenerateJson, *args: object, **kw: object) -> object:
        runs.append(1)
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(GenerateJson, "run", counted)
    compiler.compile_file(ROOT / "tests" / "p4programs" / "basic_router.p4")
    assert len(runs) == 1


def test_errors_in_dropped_code_are_reported_with_the_others() -> None:
    # A type error in an applied table's action, one in an action nothing uses and one in
    # the key of a table nothing applies: all three in one run.
    ingress = """
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action used() { hdr.p.a = 16w1; }
    action unused() { hdr.p.b = 16w2; }
    table t { key = { hdr.p.a: exact; } actions = { used; } }
    table never { key = { hdr.p.zz: exact; } actions = { NoAction; } }
    apply { t.apply(); }
}
"""
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(HEAD.replace("V1Switch", ingress + "V1Switch"), "t.p4")
    lines = [d.pos.line for d in info.value.diagnostics]
    messages = " | ".join(d.message for d in info.value.diagnostics)
    assert len(lines) == 3, messages
    src = (HEAD.replace("V1Switch", ingress + "V1Switch")).splitlines()
    assert "16w1" in src[lines[0] - 1] and "16w2" in src[lines[1] - 1] \
        and "zz" in src[lines[2] - 1], messages
