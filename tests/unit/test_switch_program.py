"""The typed program model (netsum.switch.program): what the loader keeps of each checksum, and
that every consumer reads it from there (the JSON's checksums are not read after loading)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from netsum.switch.layout import FieldSlot
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline
from netsum.switch.program import Checksum

ROUTER = json.loads((Path(__file__).resolve().parents[1] / "switch_json" / "router.json")
                    .read_text())


def test_the_router_checksum_as_loaded() -> None:
    pl = Pipeline(copy.deepcopy(ROUTER))
    ipv4 = pl.layout.headers["ipv4"]
    slot = dict(ipv4.fields)["hdrChecksum"]
    assert pl.checksums == (Checksum(
        "cksum", "checksums[0] ('cksum')", "calc", ["ipv4", "hdrChecksum"],
        FieldSlot(slot.index, 16, False), ROUTER["checksums"][0]["if_cond"], False, True),)


class _Once(dict):  # type: ignore[type-arg]
    """A program whose `checksums` may be read once (by the loader) and never again."""
    reads = 0

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        if key == "checksums":
            self.reads += 1
            assert self.reads == 1, "the JSON's checksums were read after loading"
        return super().get(key, default)

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        assert key != "checksums", "the JSON's checksums were read by subscript"
        return super().__getitem__(key)


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_checksums_are_read_from_the_json_once_and_still_computed(native: bool) -> None:
    if native and (why := build.available()) is not None:
        pytest.skip(f"native backend not buildable: {why}")
    doc = _Once(copy.deepcopy(ROUTER))
    pl = Pipeline(doc, native=native)
    assert (pl.native is not None) == native, pl.native_status
    assert doc.reads == 1
    assert pl.update_checksums is not None and pl.verify_checksums is None
