"""Mutation fuzz of the BMv2 JSON loader: thousands of broken variants of real p4c output (and
of netsum-p4c's) must each load, or fail with a ConfigError whose message starts with the JSON
path of the object at fault (`actions[3] ('MyIngress.fwd').primitives[0] ('assign'): ...`), or
for text that is not JSON, with the line and column; never with any other exception.

A mutation, at a random node of the document: the value replaced by junk of another type
(None, numbers out of range, huge integers, floats, empty containers, strings that look like
hexstr), deleted, a string swapped for another string of the same document (dangling and
crossed references), an integer moved to an edge value, a list element duplicated, a container
reordered; or, one time in twenty, the JSON text truncated.  Seeded (tests/fuzzing.py).

Size: 1000 variants by default (NETSUM_FUZZ_SCALE multiplies it).
"""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fuzzing import fuzz_count, fuzz_rng
from netsum.switch.device import Device
from netsum.switch.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "p4c"
SMALL = sorted(FIXTURES.glob("*.json")) + sorted((FIXTURES / "constructs").glob("*.json")) + \
    sorted((ROOT / "tests" / "switch_json").glob("*.json"))
#: netsum.p4 at K=32 loads ~50x slower than the small programs: a few percent of the cases.
NETSUM = FIXTURES / "netsum_k32.json"
SMALL = [p for p in SMALL if not p.name.startswith("netsum_")]
JUNK: list[Any] = [None, 0, -1, "x", "", [], {}, [None], [[]], {"type": "field"}, True, 2**70,
                   -2**70, "0x", 1.5, {"type": "hexstr", "value": "zz"},
                   {"type": "expression", "value": None}, ["a", "b", "c"]]
#: `section[i]`, optionally `('name')`, then `.` or `:` - the start of every ConfigError.
OBJECT_PATH = re.compile(r"^(__meta__|[a-z_]+)(\[\d+\])?( \('.*?'\))?[.:]")
JSON_POSITION = re.compile(r"^device config is not valid JSON: .* line \d+ column \d+")


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _strings(node: Any, acc: set[str]) -> set[str]:
    if isinstance(node, dict):
        for v in node.values():
            _strings(v, acc)
    elif isinstance(node, list):
        for v in node:
            _strings(v, acc)
    elif isinstance(node, str):
        acc.add(node)
    return acc


class Corpus:
    """One document: its text (parsed again per case: a cheap deep copy), node paths and
    strings."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.text = path.read_text()
        doc = json.loads(self.text)
        self.paths = _paths(doc)
        self.strings = sorted(_strings(doc, set()))

    def mutate(self, rng: random.Random) -> tuple[str, str]:
        """(mutated JSON text, what was done)."""
        if rng.random() < 0.05:
            cut = rng.randrange(len(self.text))
            return self.text[:cut], f"text truncated at {cut}"
        doc = json.loads(self.text)
        where = rng.choice(self.paths)
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        key = where[-1]
        value = parent[key]
        op = rng.randrange(6)
        if op == 1:
            del parent[key]
            what = "deleted"
        elif op == 2 and isinstance(value, str):
            parent[key] = rng.choice(self.strings)
            what = f"{value!r} -> {parent[key]!r}"
        elif op == 3 and type(value) is int:
            parent[key] = rng.choice([value + 1, value - 1, -value, value * 1000, 0, 2**32, 2**64])
            what = f"{value} -> {parent[key]}"
        elif op == 4 and isinstance(parent, list):
            parent.insert(rng.randrange(len(parent) + 1), value)
            what = "element duplicated"
        elif op == 5 and isinstance(value, (list, dict)) and len(value) > 1:
            parent[key] = value[::-1] if isinstance(value, list) else \
                dict(reversed(list(value.items())))
            what = "reordered"
        else:
            parent[key] = rng.choice(JUNK)
            what = f"-> {parent[key]!r}"
        return json.dumps(doc), f"{'/'.join(map(str, where))} {what}"


@pytest.mark.slow
def test_mutated_configs_get_errors_naming_the_object_never_a_crash() -> None:
    rng, seed = fuzz_rng("loader fuzz", 2718)
    n = fuzz_count(1000)
    small = [Corpus(p) for p in SMALL]
    netsum = Corpus(NETSUM)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    for case in range(n):
        corpus = netsum if rng.random() < 0.03 else rng.choice(small)
        text, what = corpus.mutate(rng)
        if rng.random() < 0.2 and not what.startswith("text"):
            # A second mutation on top of the first (the text round-trips through the corpus).
            again = Corpus.__new__(Corpus)
            again.name, again.text = corpus.name, text
            again.paths, again.strings = _paths(json.loads(text)), corpus.strings
            if again.paths:
                text, more = again.mutate(rng)
                what += "; " + more
        where = f"case {case} ({corpus.name}: {what})"
        try:
            Device.build_pipeline(text)
            outcomes["loaded"] += 1
        except ConfigError as err:
            outcomes["refused"] += 1
            message = str(err)
            if not (OBJECT_PATH.match(message) or JSON_POSITION.match(message)):
                failures.append(f"{where}: error names no object: {message}")
        except Exception as exc:  # noqa: BLE001 - the point of the test: nothing else escapes
            outcomes["crash"] += 1
            failures.append(f"{where}: {type(exc).__name__}: {exc}")
    print(f"loader fuzz: {n} variants, {dict(outcomes)}")
    assert not failures, f"seed {seed}: {len(failures)} failures, first: " + "\n".join(failures[:5])
    assert outcomes["loaded"] > n // 20 and outcomes["refused"] > n // 2, outcomes


@pytest.mark.parametrize("where, junk, prefix", [
    # Shapes no init step checks for; before `loading` they said "malformed device config".
    (("actions", 0, "runtime_data"), 2**70, "actions[0]"),
    (("pipelines", 0, "tables"), 7, "pipelines[0] ('ingress')"),
    (("parsers", 0, "parse_states", 0, "transitions"), 1.5, "parsers[0] ('parser').parse_states[0]"),
    (("headers", 0, "id"), [], "headers[0]"),
])
def test_malformed_shapes_name_their_object(where: tuple[Any, ...], junk: Any, prefix: str
                                            ) -> None:
    doc = json.loads((FIXTURES / "l2_mcast.json").read_text())
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = junk
    with pytest.raises(ConfigError) as err:
        Device.build_pipeline(doc)
    assert str(err.value).startswith(prefix), str(err.value)
