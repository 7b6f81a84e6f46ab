"""The compiler against real p4c 1.2.5.16 output (../shared/fixtures/p4c): identical P4Info,
and the same BMv2 JSON apart from source_info and p4c's extra copy-in temporaries."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

import compiler
from compiler.ids import Prefix, jenkins_oaat


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


@pytest.mark.parametrize("name", ["l2_mcast", "calc_state"])
def test_p4info_parses_as_protobuf(p4c_fixtures: Path, name: str) -> None:
    res = _compile(p4c_fixtures, name)
    again = text_format.Parse(res.p4info_text(), p4info_pb2.P4Info())
    assert again == res.p4info


def test_l2_mcast_json_matches_p4c(p4c_fixtures: Path) -> None:
    ours = _strip(_compile(p4c_fixtures, "l2_mcast").bmv2_json)
    theirs = _strip(json.loads((p4c_fixtures / "l2_mcast.json").read_text()))
    assert ours == theirs


# p4c copies some extern arguments into temporaries (register indexes, hash inputs) where we
# use the fields directly; those are the only sections allowed to differ for calc_state.
_CALC_DIFFERS = {"header_types", "actions", "calculations"}


def test_calc_state_json_matches_p4c_structure(p4c_fixtures: Path) -> None:
    ours = _strip(_compile(p4c_fixtures, "calc_state").bmv2_json)
    theirs = _strip(json.loads((p4c_fixtures / "calc_state.json").read_text()))
    assert list(ours) == list(theirs)
    for key in theirs:
        if key not in _CALC_DIFFERS:
            assert ours[key] == theirs[key], key
    assert ours["header_types"][1:] == theirs["header_types"][1:]
    assert [a["name"] for a in ours["actions"]] == [a["name"] for a in theirs["actions"]]

    def ops(a: dict[str, Any]) -> list[str]:
        # Ignore p4c's copy-in assignments to scalars temporaries.
        return [p["op"] for p in a["primitives"]
                if not (p["op"] == "assign" and p["parameters"][0]["value"][0] == "scalars"
                        and p["parameters"][0]["value"][1].startswith("tmp_"))]

    for x, y in zip(ours["actions"], theirs["actions"]):
        assert ops(x) == ops(y), x["name"]
    untouched = {"CalcIngress.op_add", "CalcIngress.op_sub", "CalcIngress.op_div_like",
                 "CalcIngress.op_unknown", "calc_state102", "calc_state105"}
    for x, y in zip(ours["actions"], theirs["actions"]):
        if x["name"] in untouched:
            assert x == y
    assert [(c["name"], c["algo"]) for c in ours["calculations"]] == \
        [(c["name"], c["algo"]) for c in theirs["calculations"]]
    assert ours["calculations"][1:] == theirs["calculations"][1:]


@pytest.mark.parametrize("name,prefix,expected", [
    ("MyIngress.ipv4_lpm", Prefix.TABLE, 37375156),
    ("MyIngress.ipv4_forward", Prefix.ACTION, 28792405),
    ("MyIngress.drop", Prefix.ACTION, 25652968),
    ("NoAction", Prefix.ACTION, 21257015),
])
def test_known_p4info_ids(name: str, prefix: Prefix, expected: int) -> None:
    assert (prefix << 24) | (jenkins_oaat(name.encode()) & 0xFFFFFF) == expected
