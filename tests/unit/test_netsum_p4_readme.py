"""p4/README.md is the controller's contract: its tables, counters and registers must say exactly
what the compiled program's P4Info and JSON contain (names, key fields, widths, action params,
defaults, counter units), so the document cannot drift from the program."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from netsum.build import ensure_built

README = Path(__file__).resolve().parents[2] / "p4" / "README.md"
SIZE_MACROS = {"NETSUM_MAX_JOBS": 256}
UNITS = {"packets": p4info_pb2.CounterSpec.PACKETS, "bytes": p4info_pb2.CounterSpec.BYTES,
         "packets+bytes": p4info_pb2.CounterSpec.BOTH}

Doc = tuple[p4info_pb2.P4Info, dict]


@pytest.fixture(scope="module")
def program() -> Doc:
    json_path, info_path = ensure_built()
    info = text_format.Parse(info_path.read_text(), p4info_pb2.P4Info())
    return info, json.loads(json_path.read_text())


def _readme_tables() -> list[tuple[str, int, list[tuple[str, str, int]], dict[str, list[tuple[str, int]]], str]]:
    """(full table name, size, keys, {action: params}, default) for every table row."""
    rows = []
    control = None
    for line in README.read_text().splitlines():
        heading = re.match(r"### \w+ \(`(\w+)\.\*`\)", line)
        if heading:
            control = heading.group(1)
            continue
        m = re.match(r"\| `(\w+)` \((\w+)\) \| (.*?) \| (.*?) \| `(.*?)` \|$", line)
        if not m:
            continue
        assert control, f"table row before a control heading: {line}"
        name, size, keys, actions, default = m.groups()
        size_n = int(size) if size.isdigit() else SIZE_MACROS[size]
        key_list = [(k, mt, int(w)) for k, mt, w in
                    re.findall(r"`([\w.]+)` (exact|lpm|ternary|range|optional) \((\d+)\)", keys)]
        acts: dict[str, list[tuple[str, int]]] = {}
        for call in re.findall(r"`(\w+(?:\([^)]*\))?)`", actions):
            aname, _, params = call.partition("(")
            plist = [p.split(":") for p in params.rstrip(")").split(",") if p.strip()]
            acts[aname] = [(p.strip(), int(w)) for p, w in plist]
        rows.append((f"{control}.{name}", size_n, key_list, acts, default))
    return rows


def _action_name(short: str, control: str) -> str:
    return short if short == "NoAction" else f"{control}.{short}"


def test_readme_lists_every_table(program: Doc) -> None:
    info, _ = program
    assert sorted(r[0] for r in _readme_tables()) == sorted(t.preamble.name for t in info.tables)


@pytest.mark.parametrize("row", _readme_tables(), ids=lambda r: r[0])
def test_readme_table_row_matches_p4info(row: tuple, program: Doc) -> None:  # type: ignore[type-arg]
    info, doc = program
    name, size, keys, acts, default = row
    control = name.split(".")[0]
    table = next(t for t in info.tables if t.preamble.name == name)
    actions = {a.preamble.id: a for a in info.actions}
    assert table.size == size
    kind = p4info_pb2.MatchField.MatchType.Name
    assert [(m.name, kind(m.match_type).lower(), m.bitwidth) for m in table.match_fields] == keys
    in_info = {actions[r.id].preamble.name: [(p.name, p.bitwidth) for p in actions[r.id].params]
               for r in table.action_refs}
    assert in_info == {_action_name(a, control): p for a, p in acts.items()}
    # default: name from P4Info, arguments from the JSON's default entry
    dname, _, dargs = default.partition("(")
    assert actions[table.initial_default_action.action_id].preamble.name == _action_name(dname, control)
    jt = next(t for p in doc["pipelines"] for t in p["tables"] if t["name"] == name)
    args = [int(a, 0) for a in dargs.rstrip(")").split(",") if a.strip()]
    assert [int(v, 16) for v in jt["default_entry"]["action_data"]] == args


def test_readme_counters_match_p4info(program: Doc) -> None:
    info, _ = program
    rows = dict(re.findall(r"^\| `(Netsum\w+\.\w+)` \| ([\w+]+) \|", README.read_text(), re.M))
    assert {c.preamble.name: c.spec.unit for c in info.counters} == {
        n: UNITS[u] for n, u in rows.items()}


def test_readme_registers_match_json(program: Doc) -> None:
    _, doc = program
    regs = {r["name"]: r["bitwidth"] for r in doc["register_arrays"]}
    rows = re.findall(r"^\| `(\w+)`(?: \(`[^|]*)? \| (\d+) \|", README.read_text(), re.M)
    assert rows, "no register rows found in p4/README.md"
    for name, width in rows:
        assert regs[f"NetsumIngress.{name}"] == int(width), name
    documented = {f"NetsumIngress.{n}" for n, _ in rows}
    values = {n for n in regs if re.fullmatch(r"NetsumIngress\.val\d{3}", n)}
    assert set(regs) - values == documented - values
