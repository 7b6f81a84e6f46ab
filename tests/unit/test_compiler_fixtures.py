"""The compiler against real p4c 1.2.5.16 output (tests/fixtures/p4c): identical P4Info
text, and the same BMv2 JSON apart from source_info."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from netsum import p4c as compiler
from netsum.p4c.ids import Prefix, jenkins_oaat


def _strip(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k != "source_info"}
    if isinstance(o, list):
        return [_strip(x) for x in o]
    return o


def _compile(fixtures: Path, name: str) -> compiler.CompileResult:
    return compiler.compile_file(fixtures / f"{name}.p4")


@pytest.mark.parametrize("name", ["l2_mcast", "calc_state"])
def test_p4info_text_is_identical(p4c_fixtures: Path, name: str) -> None:
    ours = _compile(p4c_fixtures, name).p4info_text()
    assert ours == (p4c_fixtures / f"{name}.p4info.txtpb").read_text()


@pytest.mark.parametrize("k", [32, 64])
def test_netsum_snapshot_p4info_is_identical(p4c_fixtures: Path, k: int) -> None:
    """An earlier netsum.p4 (netsum_snapshot.p4) at both K: table order is p4c's declaration
    order, not the order the tables are applied in."""
    res = compiler.compile_file(p4c_fixtures / "netsum_snapshot.p4",
                                defines={"NETSUM_K": str(k)})
    assert res.p4info_text() == (p4c_fixtures / f"netsum_k{k}.p4info.txtpb").read_text()


@pytest.mark.parametrize("name", ["l2_mcast", "calc_state"])
def test_p4info_parses_as_protobuf(p4c_fixtures: Path, name: str) -> None:
    res = _compile(p4c_fixtures, name)
    again = text_format.Parse(res.p4info_text(), p4info_pb2.P4Info())
    assert again == res.p4info


@pytest.mark.parametrize("name", ["l2_mcast", "calc_state"])
def test_json_matches_p4c(p4c_fixtures: Path, name: str) -> None:
    """Everything but source_info: objects, ids, names, scalars (temporaries included),
    primitives, expressions, tables, next_tables, conditionals, checksums, calculations."""
    ours = _strip(_compile(p4c_fixtures, name).bmv2_json)
    theirs = _strip(json.loads((p4c_fixtures / f"{name}.json").read_text()))
    assert list(ours) == list(theirs)
    for key in theirs:
        assert ours[key] == theirs[key], key


@pytest.mark.parametrize("name,prefix,expected", [
    ("MyIngress.ipv4_lpm", Prefix.TABLE, 37375156),
    ("MyIngress.ipv4_forward", Prefix.ACTION, 28792405),
    ("MyIngress.drop", Prefix.ACTION, 25652968),
    ("NoAction", Prefix.ACTION, 21257015),
])
def test_known_p4info_ids(name: str, prefix: Prefix, expected: int) -> None:
    assert (prefix << 24) | (jenkins_oaat(name.encode()) & 0xFFFFFF) == expected
