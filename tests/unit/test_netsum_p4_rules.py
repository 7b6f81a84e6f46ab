"""The BMv2 rules netsum.p4 promises (p4/README.md), checked on the compiled JSON so a later edit
cannot quietly break them: no control flow inside actions (older p4c's Predication rejects
extern calls in branches, and BMv2 locks registers per action, so decisions belong in `apply`),
and every register access uses the range-checked slot index (idx or idx ^ 1)."""
from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from netsum.build import ensure_built
from netsum.wire import K_SUPPORTED

IDX_FIELD_SUFFIX = ".idx"
CIDX_FIELD_SUFFIX = ".cidx"
PER_JOB_REGISTERS = {"NetsumIngress.last_refusal", "NetsumIngress.last_refused_bit",
                     "NetsumIngress.last_refusal_tag"}


def _program(k: int) -> dict[str, Any]:
    return json.loads(ensure_built(k)[0].read_text())


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _unwrap(v: dict[str, Any]) -> dict[str, Any]:
    while v.get("type") == "expression" and isinstance(v.get("value"), dict) \
            and "op" not in v["value"]:
        v = v["value"]
    return v


def _is_idx(v: dict[str, Any]) -> bool:
    v = _unwrap(v)
    return v.get("type") == "field" and v["value"][0] == "scalars" \
        and v["value"][1].endswith(IDX_FIELD_SUFFIX)


def _is_cidx(v: dict[str, Any]) -> bool:
    """The per-job index: job_id when below NETSUM_MAX_JOBS, else 0 (range-checked in apply),
    which the per-job registers (the last refusal, sized NETSUM_MAX_JOBS) use."""
    v = _unwrap(v)
    return v.get("type") == "field" and v["value"][0] == "scalars" \
        and v["value"][1].endswith(CIDX_FIELD_SUFFIX)


def _is_idx_xor_1(v: dict[str, Any]) -> bool:
    """idx ^ 1, possibly masked to 32 bits by the compiler."""
    v = _unwrap(v)
    if v.get("type") != "expression":
        return False
    e = v["value"]
    if e["op"] == "&":
        return _is_idx_xor_1(e["left"])
    return e["op"] == "^" and _is_idx(e["left"]) and \
        _unwrap(e["right"]).get("type") == "hexstr" and int(_unwrap(e["right"])["value"], 16) == 1


@pytest.mark.parametrize("k", K_SUPPORTED)
def test_no_control_flow_inside_actions(k: int) -> None:
    for action in _program(k)["actions"]:
        ops = {p["op"] for p in action["primitives"]}
        assert not ops & {"_jump", "_jump_if_zero"}, action["name"]
        assert not [n for n in _walk(action["primitives"]) if n.get("op") == "?"], action["name"]


@pytest.mark.parametrize("k", K_SUPPORTED)
def test_register_indices_are_the_checked_slot_index(k: int) -> None:
    checked = 0
    for action in _program(k)["actions"]:
        temps: dict[tuple[str, str], dict[str, Any]] = {}
        for prim in action["primitives"]:
            params = prim["parameters"]
            if prim["op"] == "assign" and params[0]["type"] == "field":
                temps[tuple(params[0]["value"])] = params[1]  # type: ignore[index]
            if prim["op"] not in ("register_read", "register_write"):
                continue
            index = params[2] if prim["op"] == "register_read" else params[1]
            if index["type"] == "field" and not _is_idx(index):
                # a compiler temporary: look at what the action assigned to it
                index = temps.get(tuple(index["value"]), index)  # type: ignore[arg-type]
            register = params[1]["value"] if prim["op"] == "register_read" else \
                params[0]["value"]
            if register in PER_JOB_REGISTERS:
                assert _is_cidx(index), (action["name"], register, index)
            else:
                assert _is_idx(index) or _is_idx_xor_1(index), (action["name"], index)
            checked += 1
    assert checked >= 4 * k   # at least: init, add, load and store of every value register
