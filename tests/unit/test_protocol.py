"""The one definition of the wire protocol (netsum/wire/) against its other copies:
the P4 header declaration and constants in p4/netsum.p4, and the generated blocks of
docs/protocol.md and docs/quantization.md."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from netsum import wire as protocol
from netsum.wire import HEADER_FIELDS, MsgType
from netsum.workers import docgen, wire

ROOT = Path(__file__).resolve().parents[2]
P4 = ROOT / "p4" / "netsum.p4"


def p4_text() -> str:
    if not P4.exists():
        pytest.skip("p4/netsum.p4 not present")
    return P4.read_text()


def test_p4_header_matches_field_table() -> None:
    m = re.search(r"header\s+netsum_t\s*\{(.*?)\}", p4_text(), re.S)
    assert m, "p4/netsum.p4 declares no `header netsum_t`"
    fields = re.findall(r"bit<(\d+)>\s+(\w+)\s*;", m.group(1))
    assert [(name, int(bits)) for bits, name in fields] == \
        [(f.name, f.bits) for f in HEADER_FIELDS]


@pytest.mark.parametrize("p4_name, value", [
    ("NETSUM_UDP_PORT", protocol.UDP_PORT),
    ("MSG_DATA", int(MsgType.DATA)),
    ("MSG_RESULT", int(MsgType.RESULT)),
    ("MSG_REJECT", int(MsgType.REJECT)),
    ("FLAG_RETX", int(protocol.Flags.RETX)),
    ("FLAG_NONFINITE", int(protocol.Flags.NONFINITE)),
    ("FLAG_ACK", int(protocol.Flags.ACK)),
    ("DEST_ALL", protocol.DEST_ALL),
    ("RANK_SWITCH", protocol.RANK_SWITCH),
])
def test_p4_constants(p4_name: str, value: int) -> None:
    m = re.search(rf"const\s+bit<\d+>\s+{p4_name}\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", p4_text())
    assert m, f"p4/netsum.p4 does not define {p4_name}"
    assert int(m.group(1), 0) == value


def test_p4_k_values() -> None:
    text = p4_text()
    default = re.search(r"#define\s+NETSUM_K\s+(\d+)", text)
    assert default and int(default.group(1)) == protocol.K_DEFAULT
    supported = tuple(int(k) for k in re.findall(r"#(?:el)?if\s+NETSUM_K\s*==\s*(\d+)", text))
    assert supported == protocol.K_SUPPORTED


def test_p4_values_header_has_k_words() -> None:
    for k in protocol.K_SUPPORTED:
        assert wire.packet_dtype(k).itemsize == protocol.HEADER_BYTES + 4 * k
    # The X-macro lists name v000..v999, v1000..v2047 (field and register of one lane share
    # its number): 32 per group, as many groups as K_SUPPORTED needs.
    pairs = re.findall(r"M\(v(\d{3,4}), val(\d{3,4})\)", p4_text())
    assert all(f == r for f, r in pairs)
    assert sorted(int(f) for f, _ in pairs) == list(range(max(protocol.K_SUPPORTED)))
    assert {f for f, _ in pairs} == {f"{i:03d}" for i in range(max(protocol.K_SUPPORTED))}


@pytest.mark.parametrize("doc", sorted({d for d, _ in docgen.BLOCKS.values()}))
def test_docs_generated_blocks_are_current(doc: str) -> None:
    text = (ROOT / "docs" / doc).read_text()
    assert docgen.render_into(text, doc) == text, \
        f"docs/{doc} is stale: run `python -m netsum.workers.docgen`"


def test_docs_quote_constants_from_code() -> None:
    """Numbers the prose of docs/protocol.md quotes outside the generated tables."""
    text = (ROOT / "docs" / "protocol.md").read_text()
    assert "IHL 5" in text and f"Ethernet (14) | IPv4 (20, no options) | UDP (8) | netsum " \
        f"header ({protocol.HEADER_BYTES}) | K x int32 (4K)" in text
    quant_text = (ROOT / "docs" / "quantization.md").read_text()
    assert f"`MAX_WORKERS` = {protocol.MAX_WORKERS}" in quant_text
    assert f"`e + {protocol.EXP_BIAS}`" in quant_text
    assert f"`EXP_ZERO` = {protocol.EXP_ZERO}" in quant_text


def test_render_into_needs_markers() -> None:
    with pytest.raises(ValueError, match="markers not found"):
        docgen.render_into("no markers here", "protocol.md")


def test_header_layout_invariants() -> None:
    assert protocol.HEADER_BYTES == sum(f.bits for f in HEADER_FIELDS) // 8 == 24
    # the codec's one struct: docs/protocol.md's field widths, big-endian
    assert wire.HEADER_STRUCT.format == ">BBHHBBIIBBBBI"
    assert protocol.packet_bytes(32) == 14 + 20 + 8 + 24 + 128
    assert protocol.header_only_bytes() == 14 + 20 + 8 + 24
    assert [protocol.klog2(k) for k in protocol.K_SUPPORTED] == [5, 6, 7, 8, 9, 10, 11]
    assert protocol.K_HARDWARE_MAX == 256 and protocol.K_DEFAULT <= protocol.K_HARDWARE_MAX
    # every reason but NONE names the field its REJECT carries the switch's value in
    assert set(protocol.REASON_FIELD) == set(protocol.Reason) - {protocol.Reason.NONE}
    assert set(protocol.REASON_FIELD.values()) <= {f.name for f in HEADER_FIELDS}
    assert (1 << 16) - 1 == protocol.MAX_SLOTS
    assert [protocol.round_set(r) for r in (0, 1, 2, (1 << 32) - 1)] == [0, 1, 0, 1]
    assert protocol.next_round((1 << 32) - 1) == 0


def test_wireformat_is_a_leaf() -> None:
    """The one definition imports nothing of the project, so every layer may import it."""
    import ast
    project = {"netsum", "tests"}
    for path in (ROOT / "netsum" / "wire").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not {n.split(".")[0] for n in names} & project, (path.name, names)
