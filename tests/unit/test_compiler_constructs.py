"""Valid P4 constructs that real p4c accepts (tests/fixtures/p4c/constructs: each program with
p4c 1.2.5.16's JSON and P4Info): netsum-p4c compiles every one, its P4Info is byte for byte
p4c's, and its JSON behaves like p4c's on the embedded switch — the same frames in give the
same frames out (p4c's JSON is the reference; the two JSON documents share no code)."""
from __future__ import annotations

import json
from typing import Callable

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Exact, TableEntry

from conftest import P4C_FIXTURES

CONSTRUCTS = P4C_FIXTURES / "constructs"
NAMES = sorted(p.stem for p in CONSTRUCTS.glob("*.p4"))
DST = bytes.fromhex("0a0b0c0d0e0f")
SRC = bytes.fromhex("010203040506")
FRAMES = [DST + SRC + t.to_bytes(2, "big") + b"payload-0123456789"
          for t in (0x0000, 0x0001, 0x0800, 0x1234, 0xDEAD)]


def test_the_constructs_are_all_there() -> None:
    # One program per construct the compiler used to reject or miscompile.
    assert len(NAMES) >= 18


@pytest.mark.parametrize("name", NAMES)
def test_p4info_is_identical(name: str) -> None:
    ours = compiler.compile_file(CONSTRUCTS / f"{name}.p4").p4info_text()
    assert ours == (CONSTRUCTS / f"{name}.p4info.txtpb").read_text()


#: Control-plane state installed the same way in both devices before the frames.
SETUP: dict[str, Callable[[Device], None]] = {
    "no_default_action": lambda d: d.pipeline.tables["I.t"].insert(
        TableEntry((Exact(0x0800),), ActionCall("I.fwd", (3,)))),
    "local_init_table": lambda d: d.pipeline.tables["I.t1"].insert(
        TableEntry((Exact(0x1234),), ActionCall("I.fwd", (2,)))),
    "global_register": lambda d: d.pipeline.registers["gr"].write(0, 0x42),
    # fwd(2, Kind_t.ODD) on IP frames: later frames see ODD in the register (hdr.eth.src = 1)
    "ser_enum": lambda d: d.pipeline.tables["I.t"].insert(
        TableEntry((Exact(0x0800),), ActionCall("I.fwd", (2, 0x1234)))),
}



def device(doc: dict[str, object], name: str) -> Device:
    d = Device()
    d.install(Device.build_pipeline(doc))
    SETUP.get(name, lambda _: None)(d)
    return d


@pytest.mark.parametrize("name", NAMES)
def test_json_behaves_like_p4c(name: str) -> None:
    ours = device(compiler.compile_file(CONSTRUCTS / f"{name}.p4").bmv2_json, name)
    theirs = device(json.loads((CONSTRUCTS / f"{name}.json").read_text()), name)
    for port in (1, 2):
        for frame in FRAMES:
            assert ours.process(port, frame) == theirs.process(port, frame), (name, frame[12:14])


def test_the_comparison_catches_a_wrong_assignment() -> None:
    """Which bug would the differential check miss?  Not this one: local_init_if with the
    read of the local turned into a read of the field it was supposed to copy from."""
    doc = compiler.compile_file(CONSTRUCTS / "local_init_if.p4").bmv2_json
    for act in doc["actions"]:
        for prim in act["primitives"]:
            if prim["parameters"][0].get("value") == ["eth", "src"]:
                prim["parameters"][1] = {"type": "field", "value": ["eth", "src"]}
    wrong = device(doc, "local_init_if")
    theirs = device(json.loads((CONSTRUCTS / "local_init_if.json").read_text()),
                    "local_init_if")
    assert [wrong.process(1, f) for f in FRAMES] != [theirs.process(1, f) for f in FRAMES]


def test_action_profiles_in_json_as_p4c_writes_them() -> None:
    """Beyond behaving alike, action_profile's profile part is compared with p4c's
    directly: the profiles (selector inputs in key order, hash algorithm, sizes) and
    each table's type, profile, keys and the default entry an indirect table does not have."""
    def shape(doc: dict[str, object]) -> tuple[object, object]:
        pipe = doc["pipelines"][0]  # type: ignore[index]
        profiles = [{k: v for k, v in p.items() if k != "source_info"}
                    for p in pipe["action_profiles"]]
        tables = {t["name"]: (t["type"], t.get("action_profile"), t["key"], t["max_size"],
                              "default_entry" in t)
                  for t in pipe["tables"] if not t["name"].startswith("tbl_")}
        return profiles, tables
    ours = compiler.compile_file(CONSTRUCTS / "action_profile.p4").bmv2_json
    theirs = json.loads((CONSTRUCTS / "action_profile.json").read_text())
    assert shape(ours) == shape(theirs)
