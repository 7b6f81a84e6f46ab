"""Header stacks indexed at run time (`hs[i]` with i from the packet) and stacks of header
unions, in the JSON shapes p4c writes (bmv2 docs/JSON_format.md: `dereference_header_stack`,
`access_field`, `last_stack_index`, `dereference_union_stack`, `access_union_header`,
`union_stack` extracts, `union_stack_field` select keys, `push`/`pop`/`assign_union_stack` on
union stacks).  Expected frames are worked out by hand in each case.

Stack program: `ix` (i: bit<8>), stack `hs` of 3 `e_t` (a: bit<8>) of which the parser
extracts two, then `o` (v, li: bit<8>); the deparser emits ix, hs[0..2], o.
"""
from __future__ import annotations

from typing import Any

import pytest

from bmv2json import F, expr, hexstr, prim, program
from netsum.switch.device import Device


def deref(index: Any, stack: str = "hs") -> dict[str, Any]:
    return expr("dereference_header_stack", {"type": "header_stack", "value": stack}, index)


def field_of(header: Any, offset: int) -> dict[str, Any]:
    return expr("access_field", header, offset, 2)


def stack_program(actions: list[list[dict[str, Any]]]) -> Device:
    doc = program(
        header_types=[{"name": "idx_t", "fields": [["i", 8, False]]},
                      {"name": "e_t", "fields": [["a", 8, False]]},
                      {"name": "o_t", "fields": [["v", 8, False], ["li", 8, False]]}],
        headers=[{"name": "ix", "header_type": "idx_t"}, {"name": "hs[0]", "header_type": "e_t"},
                 {"name": "hs[1]", "header_type": "e_t"}, {"name": "hs[2]", "header_type": "e_t"},
                 {"name": "o", "header_type": "o_t"}],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [
                {"op": "extract", "parameters": [{"type": "regular", "value": "ix"}]},
                {"op": "extract", "parameters": [{"type": "stack", "value": "hs"}]},
                {"op": "extract", "parameters": [{"type": "stack", "value": "hs"}]},
                {"op": "extract", "parameters": [{"type": "regular", "value": "o"}]}]}],
        actions=actions, deparse=["ix", "hs[0]", "hs[1]", "hs[2]", "o"],
        header_stacks=[{"name": "hs", "id": 0, "size": 3, "header_type": "e_t",
                        "header_ids": [2, 3, 4]}])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    return dev


def out(dev: Device, *data: int) -> bytes:
    (res,) = dev.process(1, bytes(data))
    return res[1]


IX = F("ix", "i")


def test_field_of_an_element_chosen_per_packet() -> None:
    # hs[ix.i].a = hs[ix.i].a + 0x10
    a = field_of(deref(IX), 0)
    dev = stack_program([[prim("assign", a, expr("&", expr("+", a, hexstr(0x10)),
                                                  hexstr(0xFF), 2))]])
    assert out(dev, 0, 1, 2, 0, 0) == bytes([0, 0x11, 2, 0, 0])
    assert out(dev, 1, 1, 2, 0, 0) == bytes([1, 1, 0x12, 0, 0])
    # hs[2] was never extracted: the write lands in an invalid header, nothing is emitted
    assert out(dev, 2, 1, 2, 0, 0) == bytes([2, 1, 2, 0, 0])
    # outside the stack: the write is discarded (P4_16: undefined; bmv2 would abort)
    assert out(dev, 9, 1, 2, 0, 0) == bytes([9, 1, 2, 0, 0])


def test_validity_of_elements_chosen_per_packet() -> None:
    # hs[i].setValid(); hs[i - 1].setInvalid(); o.v = hs[i].isValid(); o.li = hs.lastIndex
    minus1 = expr("&", expr("+", IX, hexstr(0xFF)), hexstr(0xFF))
    dev = stack_program([[
        prim("add_header", deref(IX)),
        prim("remove_header", deref(minus1)),
        prim("assign", F("o", "v"), expr("b2d", None, expr("valid", None, deref(IX)), 2)),
        prim("assign", F("o", "li"), expr("last_stack_index", None,
                                          {"type": "header_stack", "value": "hs"}, 2))]])
    # i = 2: hs[2] becomes valid (zeroed), hs[1] invalid; lastIndex is next - 1 = 1
    assert out(dev, 2, 1, 2, 7, 7) == bytes([2, 1, 0, 1, 1])
    # i = 0: hs[0] stays as it is; hs[255] is outside the stack
    assert out(dev, 0, 1, 2, 7, 7) == bytes([0, 1, 2, 1, 1])
    # i = 3: nothing to make valid; hs[3].isValid() reads false
    assert out(dev, 3, 1, 2, 7, 7) == bytes([3, 1, 2, 0, 1])


def test_whole_elements_copied_both_sides_chosen_per_packet() -> None:
    # hs[ix.i] = hs[o.v]
    dev = stack_program([[prim("assign_header", deref(IX), deref(F("o", "v")))]])
    assert out(dev, 2, 1, 2, 0, 0) == bytes([2, 1, 2, 1, 0, 0])     # hs[2] = hs[0]
    assert out(dev, 0, 1, 2, 2, 0) == bytes([0, 2, 2, 0])           # hs[0] = invalid hs[2]
    assert out(dev, 0, 1, 2, 5, 0) == bytes([0, 1, 2, 5, 0])        # source outside


# -------------------------------------------------------------------- stacks of unions

U_MEMBERS = ["u[0].byte", "u[0].short", "u[1].byte", "u[1].short"]
W_MEMBERS = ["w[0].byte", "w[0].short", "w[1].byte", "w[1].short"]


def union_program(actions: list[list[dict[str, Any]]], deparse_w: bool = False) -> Device:
    """`base` (t: bit<8>), then union stack `u` of 2 unions {byte: bit<8>, short: bit<16>}:
    u.next.byte, then by the last byte's value (01: short, else byte) one more member."""
    headers = [{"name": "base", "header_type": "base_t"}]
    headers += [{"name": n, "header_type": "b_t" if n.endswith("byte") else "s_t"}
                for n in U_MEMBERS + W_MEMBERS]
    extract = [{"op": "extract", "parameters": [{"type": "union_stack", "value": ["u", m]}]}
               for m in ("byte", "short")]
    default = {"type": "default", "value": None, "mask": None, "next_state": None}
    doc = program(
        header_types=[{"name": "base_t", "fields": [["t", 8, False]]},
                      {"name": "b_t", "fields": [["d", 8, False]]},
                      {"name": "s_t", "fields": [["d", 16, False]]}],
        headers=headers,
        parse_states=[
            {"name": "start", "parser_ops": [
                {"op": "extract", "parameters": [{"type": "regular", "value": "base"}]},
                extract[0]],
             "transition_key": [{"type": "union_stack_field", "value": ["u", "byte", "d"]}],
             "transitions": [{"type": "hexstr", "value": "0x01", "mask": None,
                              "next_state": "short"},
                             dict(default, next_state="byte")]},
            {"name": "short", "parser_ops": [extract[1]], "transition_key": [],
             "transitions": [default]},
            {"name": "byte", "parser_ops": [extract[0]], "transition_key": [],
             "transitions": [default]}],
        actions=actions, deparse=["base"] + U_MEMBERS + (W_MEMBERS if deparse_w else []),
        header_union_types=[{"name": "U", "id": 0, "headers": [["byte", "b_t"],
                                                               ["short", "s_t"]]}],
        header_unions=[{"name": n, "id": k, "union_type": "U", "header_ids": [2 * k + 2,
                                                                              2 * k + 3]}
                       for k, n in enumerate(["u[0]", "u[1]", "w[0]", "w[1]"])],
        header_union_stacks=[{"name": "u", "id": 0, "union_type": "U",
                              "header_union_ids": [0, 1]},
                             {"name": "w", "id": 1, "union_type": "U",
                              "header_union_ids": [2, 3]}])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    return dev


A = (0, 1, 0, 2)      # u[0].byte = 01 -> u[1].short = 0002
B = (0, 5, 7)         # u[0].byte = 05 -> u[1].byte = 07


def test_union_stack_extract_and_last_member_select() -> None:
    dev = union_program([[]])
    assert out(dev, *A) == bytes(A)
    assert out(dev, *B) == bytes(B)


US = {"type": "header_union_stack", "value": "u"}


@pytest.mark.parametrize("op, a, b", [
    ("pop", bytes([0, 0, 2]), bytes([0, 7])),     # u[0] = old u[1]; u[1] invalid
    ("push", bytes([0, 1]), bytes([0, 5])),       # u[1] = old u[0]; u[0] invalid
])
def test_union_stack_push_and_pop(op: str, a: bytes, b: bytes) -> None:
    dev = union_program([[prim(op, US, hexstr(1))]])
    assert out(dev, *A) == a
    assert out(dev, *B) == b


def test_union_chosen_per_packet() -> None:
    # u[base.t].short.setValid(); u[base.t].short.d = 0xbeef
    short = expr("access_union_header",
                 expr("dereference_union_stack", US, F("base", "t")), 1)
    dev = union_program([[prim("add_header", short),
                          prim("assign", field_of(short, 0), hexstr(0xBEEF))]])
    # t = 1 on A: u[1].short is valid already and takes the value
    assert out(dev, 1, 1, 0, 2) == bytes([1, 1, 0xBE, 0xEF])
    # t = 0 on B: u[0].short becomes valid, so u[0].byte becomes invalid (union rule)
    assert out(dev, 0, 5, 7) == bytes([0, 0xBE, 0xEF, 7])
    # t = 2: outside the stack, nothing changes
    assert out(dev, 2, 5, 7) == bytes([2, 5, 7])


def test_union_stack_copy() -> None:
    dev = union_program([[prim("assign_union_stack", {"type": "header_union_stack",
                                                      "value": "w"}, US)]], deparse_w=True)
    assert out(dev, *A) == bytes(A) + bytes(A[1:])


def test_union_stack_overflow_is_stack_out_of_bounds() -> None:
    # three members into a stack of two unions: parser error StackOutOfBounds (3)
    dev = union_program([[prim("assign", F("standard_metadata", "egress_spec"),
                               F("standard_metadata", "parser_error"))]])
    pipeline = dev.pipeline
    assert pipeline is not None
    doc = pipeline.json
    doc["parsers"][0]["parse_states"][2]["parser_ops"].append(
        {"op": "extract", "parameters": [{"type": "union_stack", "value": ["u", "byte"]}]})
    dev.install(Device.build_pipeline(doc))
    assert dev.process(1, bytes([0, 5, 7, 9])) == [(3, bytes([0, 5, 7, 9]))]


def test_parser_copy_of_a_whole_stack_written_as_assign() -> None:
    # netsum-p4c once wrote `h2 = h1` (stacks) in a parser as `assign` naming the stacks; real
    # p4c writes assign_header_stack.  Both copy the elements and the next index.
    doc = program(
        header_types=[{"name": "e_t", "fields": [["a", 8, False]]}],
        headers=[{"name": f"{s}[{k}]", "header_type": "e_t"} for s in ("h1", "h2")
                 for k in range(2)],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [
                {"op": "extract", "parameters": [{"type": "stack", "value": "h1"}]},
                {"op": "primitive", "parameters": [prim(
                    "assign", {"type": "header_stack", "value": "h2"},
                    {"type": "header_stack", "value": "h1"})]}]}],
        actions=[[]], deparse=["h1[0]", "h1[1]", "h2[0]", "h2[1]"],
        header_stacks=[{"name": "h1", "id": 0, "size": 2, "header_type": "e_t",
                        "header_ids": [1, 2]},
                       {"name": "h2", "id": 1, "size": 2, "header_type": "e_t",
                        "header_ids": [3, 4]}])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    assert dev.process(1, bytes([4, 9])) == [(0, bytes([4, 4, 9]))]


def test_field_of_the_last_union_in_an_action() -> None:
    # base.t = u.last.byte.d (a union_stack_field outside the parser)
    dev = union_program([[prim("assign", F("base", "t"),
                               {"type": "union_stack_field", "value": ["u", "byte", "d"]})]])
    assert out(dev, *B) == bytes([7, 5, 7])
    assert out(dev, *A) == bytes(A)          # u[1].byte was never extracted: reads 0
