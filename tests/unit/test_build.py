"""netsum.build: targets per K, staleness of ensure_built, golden copies, the real-p4c path and
the command line's errors."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from netsum import wire as wireformat
from netsum import build
from netsum.paths import P4_DIR
from netsum.wire import K_DEFAULT, K_SUPPORTED

ROOT = Path(__file__).resolve().parents[2]


def test_targets_build_netsum_once_per_supported_k() -> None:
    netsum = [t for t in build.targets() if t.source.name == "netsum.p4"]
    assert [(t.stem, dict(t.defines)) for t in netsum] == [
        (build.netsum_stem(k), {"NETSUM_K": str(k)}) for k in K_SUPPORTED]
    assert build.netsum_stem(K_DEFAULT) == "netsum"
    assert build.netsum_stem(64) == "netsum_k64"


def test_unsupported_k_is_a_clear_error() -> None:
    with pytest.raises(build.BuildError, match="K=48 is not supported"):
        build.target_for(48)


def test_golden_files_are_current() -> None:
    bad = build.golden_mismatches()
    assert not bad, (f"netsum's compiler output differs from tests/golden/p4/ for {bad}; if the "
                     f"change is intended run `{build.UPDATE_HINT}` and review the diff")


@pytest.mark.parametrize("k", K_SUPPORTED)
def test_built_json_declares_k_values(k: int) -> None:
    json_path, _ = build.ensure_built(k)
    doc = json.loads(json_path.read_text())
    types = {t["name"]: t for t in doc["header_types"]}
    fields = [f for f in types["values_t"]["fields"]]
    assert [(f[0], f[1]) for f in fields] == [(f"v{i:03d}", 32) for i in range(k)]
    regs = {r["name"] for r in doc["register_arrays"]}
    assert {f"NetsumIngress.val{i:03d}" for i in range(k)} <= regs
    assert f"NetsumIngress.val{k:03d}" not in regs


_LANE = re.compile(r"\b(v|val)(\d{3,4})\b")
#: the one K-dependent constant outside the lanes: log2 K, which a REJECT names (protocol v2)
_KLOG2 = re.compile(r'(\["netsum", "klog2"\]\}, \{"type": "hexstr", "value": )"(0x[0-9a-f]+)"')


def _lane_view(doc: dict[str, Any],
               klog2: int) -> dict[str, tuple[list[str], dict[int, int]]]:
    """Per action: its primitives as JSON text with lane numbers blanked (source_info
    dropped), and how many of its primitives name each lane.  A write of log2 K to the
    header's klog2 must write `klog2` and is blanked too."""
    out = {}
    for a in doc["actions"]:
        texts, per_lane = [], {}
        for prim in a["primitives"]:
            text = json.dumps({k: v for k, v in prim.items() if k != "source_info"})
            for m in _KLOG2.finditer(text):
                assert int(m.group(2), 16) == klog2, (a["name"], text)
            text = _KLOG2.sub(r'\1"KLOG2"', text)
            lanes = {int(m.group(2)) for m in _LANE.finditer(text)}
            for lane in lanes:
                per_lane[lane] = per_lane.get(lane, 0) + 1
            texts.append(_LANE.sub(r"\1###", text))
        out[a["name"]] = (texts, per_lane)
    return out


@pytest.mark.parametrize("k", [k for k in K_SUPPORTED if k not in build.GOLDEN_K])
def test_large_k_builds_repeat_the_lanes_of_the_golden_build(k: int) -> None:
    """The builds without golden copies: every action is the K=32 action with its lane
    statements repeated for lanes 0..K-1, and nothing else differs."""
    small = _lane_view(json.loads(build.ensure_built(32)[0].read_text()), 5)
    large = _lane_view(json.loads(build.ensure_built(k)[0].read_text()), k.bit_length() - 1)
    assert small.keys() == large.keys()
    lane_actions = 0
    for name, (texts, per_lane) in small.items():
        big_texts, big_lanes = large[name]
        if not per_lane:
            assert big_texts == texts, name
            continue
        lane_actions += 1
        assert sorted(big_lanes) == list(range(k)), name
        assert set(big_lanes.values()) == set(per_lane.values()) == {per_lane[0]}, name
        # Lane statements repeat in blocks: the large build's list is the small one's with
        # each lane block repeated K/32 times as often.
        lane_texts = [t for t in texts if "###" in t]
        assert [t for t in big_texts if "###" not in t] == [t for t in texts if "###" not in t]
        assert len(big_texts) - len(texts) == len(lane_texts) * (k // 32 - 1), name
        assert set(big_texts) == set(texts), name
    assert lane_actions >= 5   # first/add contribution, reply_result, resend_up, result_down


def _copy_p4(tmp: Path) -> Path:
    p4 = tmp / "p4"
    p4.mkdir()
    shutil.copy(P4_DIR / "netsum.p4", p4 / "netsum.p4")
    return p4


def test_ensure_built_rebuilds_only_when_sources_are_newer(tmp_path: Path) -> None:
    p4 = _copy_p4(tmp_path)
    out = tmp_path / "out"
    json_path, info_path = build.ensure_built(K_DEFAULT, out_dir=out, p4_dir=p4)
    assert (json_path.name, info_path.name) == ("netsum.json", "netsum.p4info.txtpb")
    assert json.loads(json_path.read_text())["__meta__"]["version"][0] == 2
    assert "tables" in info_path.read_text()
    # pretend the outputs are far newer than every input: nothing is rebuilt
    future = time.time() + 3600
    for p in (json_path, info_path):
        os.utime(p, (future, future))
    build.ensure_built(K_DEFAULT, out_dir=out, p4_dir=p4)
    assert json_path.stat().st_mtime == future
    # the source changes after that: rebuilt
    src = p4 / "netsum.p4"
    os.utime(src, (future + 10, future + 10))
    build.ensure_built(K_DEFAULT, out_dir=out, p4_dir=p4)
    assert json_path.stat().st_mtime != future


def test_the_wire_format_is_an_input_of_every_netsum_build() -> None:
    # netsum.json is the build of wireformat.K_DEFAULT: a changed default must rebuild it
    # (checked on the list of inputs: touching the module would rebuild everyone's build/p4).
    for k in K_SUPPORTED:
        assert Path(wireformat.__file__) in build._inputs(build.target_for(k))


def test_compile_errors_name_file_and_line(tmp_path: Path) -> None:
    p4 = tmp_path / "p4"
    p4.mkdir()
    (p4 / "broken.p4").write_text("#include <core.p4>\n#include <v1model.p4>\n"
                                  "header h_t { bit<8> f; }\nthis is not P4;\n")
    with pytest.raises(build.BuildError) as err:
        build.build_all(tmp_path / "out", p4_dir=p4)
    assert "broken.p4" in str(err.value) and ":4:" in str(err.value)
    assert not (tmp_path / "out" / "broken.json").exists()


def test_p4c_backend_runs_p4c_with_the_targets_defines(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in p4c-bm2-ss records its argv and writes the two outputs it is asked for."""
    fake = tmp_path / "bin" / build.P4C_BINARY
    fake.parent.mkdir()
    log = tmp_path / "argv.json"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"json.dump(sys.argv[1:], open({str(log)!r}, 'w'))\n"
        "a = sys.argv\n"
        "open(a[a.index('-o') + 1], 'w').write('{\"fake\": 1}')\n"
        "open(a[a.index('--p4runtime-files') + 1], 'w').write('pkg_info {}')\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    json_path, info_path = build.build_target(build.target_for(64), tmp_path / "out",
                                              build.Backend.P4C)
    argv = json.loads(log.read_text())
    assert argv[:3] == ["--arch", "v1model", "-DNETSUM_K=64"]
    assert argv[-1] == "p4/netsum.p4"
    assert json_path.read_text() == '{"fake": 1}' and info_path.read_text() == "pkg_info {}"


@pytest.mark.skipif(shutil.which(build.P4C_BINARY) is not None, reason="real p4c is installed")
def test_cli_p4c_missing_is_one_line_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "netsum.build", "--p4c"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: --p4c: p4c-bm2-ss is not on PATH")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_cli_rejects_update_golden_with_p4c() -> None:
    assert build.main(["--p4c", "--update-golden"]) == 1


def test_golden_mismatch_names_every_differing_file(tmp_path: Path) -> None:
    (tmp_path / "netsum_k32.json").write_text("{}")
    names = {n for t in build.golden_targets() for n in (t.json_name(), t.p4info_name())}
    # named by K, never by which K is the default (build/p4/netsum.json)
    assert {"netsum_k32.json", "netsum_k64.json"} <= names
    assert "netsum.json" not in names and "netsum_k256.json" not in names
    assert set(build.golden_mismatches(golden_dir=tmp_path)) == names
    written = build.update_golden(golden_dir=tmp_path)
    assert {p.name for p in written} == names
    assert build.golden_mismatches(golden_dir=tmp_path) == []
