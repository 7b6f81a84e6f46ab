"""The type check's results recorded once and read back by the lowering (netsum.p4c.typetable,
issue 26 point 4): a declared type is resolved once, a name once per scope it is lowered in,
an expression typed once per scope -- the counts come from the program text below, and the
outputs that depend on the recorded answers are checked against what p4c writes."""
from __future__ import annotations

import collections
import sys

import pytest

from netsum import p4c as compiler
from netsum.p4c import resolve
from netsum.p4c.scopes import Env
from netsum.p4c.typecheck import Typer

SRC = """
#include <core.p4>
#include <v1model.p4>
header p_t { bit<8> a; bit<8> b; }
struct headers { p_t p; }
struct inner_t { bit<8> v; }
struct metadata { @name("renamed") inner_t s; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.p); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_port(
        bit<9> port) { sm.egress_spec = port; }
    table t1 { key = { hdr.p.a: exact; } actions = { set_port; } }
    table t2 { key = { hdr.p.b: exact; } actions = { set_port; } }
    table t3 { key = { meta.s.v: exact; } actions = { set_port; } }
    apply { t1.apply(); t2.apply(); t3.apply(); set_port(9w3); hdr.p.a = hdr.p.b; }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.p); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
PARAM_LINE = 14  # `bit<9> port)`: the only type written on that line


def test_a_declared_type_is_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # set_port's parameter type is needed for each of its four uses (three tables and a
    # direct call: action data, binding, the hidden table's action); written once, resolved
    # once -- wherever any compiler module calls resolve_type from.
    lines: collections.Counter[int] = collections.Counter()
    real = resolve.resolve_type

    def counted(t, g, diags, type_vars=None):  # type: ignore[no-untyped-def]
        lines[t.pos.line] += 1
        return real(t, g, diags, type_vars)

    for name, mod in list(sys.modules.items()):
        if name.startswith("netsum.p4c") and hasattr(mod, "resolve_type"):
            monkeypatch.setattr(mod, "resolve_type", counted)
    res = compiler.compile_source(SRC, "t.p4")
    assert lines[PARAM_LINE] == 1
    # ... and every use got it: each table's copy of the action (p4c copies an action per
    # use) has one 9-bit parameter, the direct call's copy none (all bound).
    widths = [[r["bitwidth"] for r in a["runtime_data"]] for a in res.bmv2_json["actions"]
              if a["name"] == "I.set_port"]
    assert widths == [[9], [9], [9], []]
    assert [p.bitwidth for a in res.p4info.actions if a.preamble.name == "I.set_port"
            for p in a.params] == [9]


def test_a_name_is_resolved_once_per_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: collections.Counter[str] = collections.Counter()
    real = Env.lookup

    def counted(self: Env, name: str, top_level: bool = False):  # type: ignore[no-untyped-def]
        looked[name] += 1
        return real(self, name, top_level)

    monkeypatch.setattr(Env, "lookup", counted)
    compiler.compile_source(SRC, "t.p4")
    # `hdr` is written 6 times in parser and control bodies, each lowered once (as a member
    # base it used to be looked up twice: is it a type?  then its value).
    assert looked["hdr"] == 6
    # `sm` once, in set_port's body, which is lowered for each of its four uses.
    assert looked["sm"] == 4
    # `set_port`: three actions-list entries and one call (each list used to be resolved
    # again for the table, its default action and its entries).
    assert looked["set_port"] == 4


def test_an_expression_is_typed_once_per_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    # Typer._expr is where an expression's type is derived; each (expression, scope,
    # expected type) once.  `9w3` in the direct call is typed for its hidden action and
    # again for its table; a table key's sub-expressions once with the key.
    seen: collections.Counter[tuple[int, int, object]] = collections.Counter()
    keep: list[object] = []
    real = Typer._expr

    def counted(self: Typer, e, env, expected):  # type: ignore[no-untyped-def]
        keep.append((e, env))  # ids stay unique while counted
        seen[(id(e), id(env), expected)] += 1
        return real(self, e, env, expected)

    monkeypatch.setattr(Typer, "_expr", counted)
    res = compiler.compile_source(SRC, "t.p4")
    assert len(seen) > 20 and max(seen.values()) == 1
    # The key `meta.s.v` is named from the type of `meta.s` (inner_t, field s renamed), read
    # from the table rather than typed again: p4c's TableKeyNames gives meta.renamed.v.
    t3 = next(t for t in res.p4info.tables if t.preamble.name == "I.t3")
    assert [mf.name for mf in t3.match_fields] == ["meta.renamed.v"]


def test_a_result_is_reused_only_for_the_same_node_scope_and_expected_type() -> None:
    # `-1` typed where bit<8> is expected is 8w255, where bit<16> is, 16w65535 (P4_16 8.9:
    # the literal takes the expected width): the IR recorded in a scope answers only the same
    # question again, and another scope has its own.
    from typing import cast

    from netsum.p4c import ast as A
    from netsum.p4c.diagnostics import NOPOS, Diagnostics
    from netsum.p4c.ir import TConst
    from netsum.p4c.layout import Layout
    from netsum.p4c.types import Bits

    g = resolve.Globals()
    env, other = Env(None, g), Env(None, g)
    typer = Typer(cast(Layout, None), Diagnostics())   # typing a literal needs no layout
    e = A.Unary(NOPOS, "-", A.IntLit(NOPOS, 1, None, False, "1"))
    t8 = typer.expr(e, env, Bits(8))
    assert isinstance(t8, TConst) and (t8.type, t8.value) == (Bits(8), 255)
    assert typer.expr(e, env, Bits(8)) is t8 and env.typed_as(e) is t8
    t16 = typer.expr(e, env, Bits(16))
    assert isinstance(t16, TConst) and (t16.type, t16.value) == (Bits(16), 65535)
    assert other.typed_as(e) is None
    t8b = typer.expr(e, other, Bits(8))
    assert t8b is not t8 and isinstance(t8b, TConst) and t8b.value == 255
