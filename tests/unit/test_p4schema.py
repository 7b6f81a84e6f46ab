"""The shared P4Info model: one MatchKind encoding (p4info's wire numbers), lookups by id,
name and alias, and the import rule (a leaf package; the controller never imports the switch)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2

from netsum.schema import MatchKind, P4Schema, UnknownId, UnknownName, load_p4info

ROOT = Path(__file__).resolve().parents[2]


def test_match_kind_is_the_p4info_encoding() -> None:
    for name, number in p4info_pb2.MatchField.MatchType.items():
        assert MatchKind[name] == number
    assert MatchKind.OPTIONAL.label == "optional" and MatchKind.RANGE.needs_priority
    assert not MatchKind.LPM.needs_priority


def test_index_by_id_name_alias(p4c_fixtures: Path) -> None:
    s = P4Schema(load_p4info(p4c_fixtures / "l2_mcast.p4info.txtpb"))
    dmac = s.tables.get("dmac")
    assert s.tables.get("L2Ingress.dmac") is dmac is s.tables.get_id(dmac.id)
    assert [f.match_type for f in s.tables.get("acl").match_fields] == \
        [MatchKind.TERNARY, MatchKind.TERNARY, MatchKind.RANGE]
    assert s.tables.get("acl").needs_priority and not dmac.needs_priority
    assert s.direct_counters.get("dmac_hits").direct_table_id == dmac.id
    with pytest.raises(UnknownName, match="Did you mean 'dmac'"):
        s.tables.get("dmca")
    with pytest.raises(UnknownId):
        s.actions.get_id(1)


@pytest.mark.parametrize("module, forbidden", [
    # netsum.schema is a leaf: nothing of netsum but the (empty) umbrella package itself
    ("netsum.schema", ("netsum.switch", "netsum.controller", "netsum.p4c", "netsum.workers",
                       "netsum.wire", "netsum.training", "netsum.rig")),
    ("netsum.controller.cli", ("netsum.switch",)),
])
def test_import_boundaries(module: str, forbidden: tuple[str, ...]) -> None:
    code = (f"import sys, {module}; bad = sorted(m for m in sys.modules "
            f"if any(m == f or m.startswith(f + '.') for f in {forbidden!r})); "
            f"print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "", f"{module} imports {out}"
