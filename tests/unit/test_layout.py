"""The layout rules that keep imports sane: p4/ and mininet/ must never become Python packages."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder, shadows", [("p4", "p4runtime's `p4`"), ("mininet", "the real mininet")])
def test_not_a_package(folder: str, shadows: str) -> None:
    assert not (ROOT / folder / "__init__.py").exists(), f"{folder}/__init__.py would shadow {shadows}"


def test_p4_name_is_p4runtime() -> None:
    import p4.v1.p4runtime_pb2 as pb

    assert hasattr(pb, "WriteRequest")
