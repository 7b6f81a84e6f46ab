"""Device configs from outside within bounds (netsum.switch.jsonload), through both doors:
Device.build_pipeline (the command line) and the P4Runtime device-config decoder."""
from __future__ import annotations

import pytest

from netsum.switch.device import Device
from netsum.switch.errors import ConfigError
from netsum.switch.jsonload import strict_loads
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.pipeline_config import decode_device_config

HOSTILE = [
    (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"header_types": [], "x": 1e999}', "out of range"),
    (b'{"x": -1e400}', "out of range"),
    (b'{"x": NaN}', "not a JSON number"),
    (b'{"x": Infinity}', "not a JSON number"),
    (b'{"x": ' + b"9" * 5000 + b"}", "digits"),
    (b'{"x": "\xff"}', "not UTF-8"),
]


@pytest.mark.parametrize("text,why", HOSTILE, ids=[w for _, w in HOSTILE])
def test_hostile_json_is_refused_in_one_line(text: bytes, why: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Device.build_pipeline(text)
    assert why in exc.value.message and "\n" not in exc.value.message
    with pytest.raises(P4RTError) as p4:
        decode_device_config(text)
    assert p4.value.code == 3 and why in str(p4.value)


def test_size_limit_is_checked_before_parsing() -> None:
    with pytest.raises(ValueError, match="more than the 100 accepted"):
        strict_loads(b"[" + b"0," * 100 + b"0]", max_bytes=100)


def test_ordinary_numbers_still_load() -> None:
    assert strict_loads('{"a": 1.5e3, "b": -2, "c": 1e308}') == {"a": 1500.0, "b": -2,
                                                                 "c": 1e308}


def test_command_line_says_one_line_and_exits_1(tmp_path: object) -> None:
    import subprocess
    import sys
    from pathlib import Path
    path = Path(str(tmp_path)) / "deep.json"
    path.write_bytes(HOSTILE[0][0])
    proc = subprocess.run([sys.executable, "-m", "netsum.switch", str(path), "--", "--no-grpc"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "nested too deeply" in proc.stderr
    assert "Traceback" not in proc.stderr
