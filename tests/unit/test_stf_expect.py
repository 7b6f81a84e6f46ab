"""Frame comparison against `expect` lines: masks, `$`, counts per port, silent ports."""
from __future__ import annotations

from netsum.tools.stf.expect import compare_ports, frame_mismatch
from netsum.tools.stf.syntax import Expect


def test_nibble_masks_and_prefix_match() -> None:
    assert frame_mismatch("0A*B", False, bytes.fromhex("0a1b")) is None
    assert frame_mismatch("0A*B", False, bytes.fromhex("0aff")) is not None
    # A longer frame matches a shorter pattern (a payload the pattern leaves out)...
    assert frame_mismatch("0A", False, bytes.fromhex("0a0b0c")) is None
    # ...unless the line ended in $.
    assert "too long" in (frame_mismatch("0A", True, bytes.fromhex("0a0b")) or "")
    assert frame_mismatch("0A0B", True, bytes.fromhex("0a0b")) is None
    assert "too short" in (frame_mismatch("0A0B0C", False, bytes.fromhex("0a0b")) or "")
    assert frame_mismatch(None, False, b"anything") is None


def test_mismatch_names_the_first_differing_byte() -> None:
    why = frame_mismatch("000102030405", False, bytes.fromhex("000102ff0405"))
    assert why is not None and why.startswith("byte 3 differs: expected 03, got FF")


def test_ports_compared_in_order_and_counted() -> None:
    exp = [Expect(1, 2, "AA"), Expect(2, 3, "BB"), Expect(3, 2, "CC")]
    ok = {2: [b"\xaa", b"\xcc"], 3: [b"\xbb"]}
    assert compare_ports(exp, ok, [0, 2, 3]) == []
    swapped = {2: [b"\xcc", b"\xaa"], 3: [b"\xbb"]}
    problems = compare_ports(exp, swapped, [0, 2, 3])
    assert [(p.port, p.line) for p in problems] == [(2, 1), (2, 3)]


def test_missing_and_extra_frames() -> None:
    exp = [Expect(1, 2, "AA"), Expect(2, 2, None)]
    missing = compare_ports(exp, {2: [b"\xaa"]}, [2])
    assert len(missing) == 1 and missing[0].line == 2 and "never sent" in missing[0].message
    # A port the test uses but expects nothing on must stay silent...
    extra = compare_ports(exp, {2: [b"\xaa", b"\x00"], 0: [b"\x01"]}, [0, 2])
    assert [p.port for p in extra] == [0]
    # ...while frames on ports the test never names are not looked at.
    assert compare_ports(exp, {2: [b"\xaa", b"\x00"], 7: [b"\x01"]}, [0, 2]) == []
