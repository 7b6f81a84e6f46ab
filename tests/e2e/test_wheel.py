"""netsum as users install it: a built wheel puts one import name, `netsum`, into site-packages,
and the installed package runs the demo from a directory that is not the checkout.

The wheel is built from this checkout (pip wheel --no-deps, no network) and installed with
--no-deps into a fresh virtual environment whose dependencies come from the project's own
environment through a path entry: that entry is not a site directory, so the project's editable
install (a .pth hook there) is not seen, and every `netsum` module the demo runs is the wheel's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(out), str(ROOT)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (whl,) = out.glob("netsum-*.whl")
    yield whl


def test_wheel_installs_one_import_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"netsum"}, sorted(tops)
    # the pieces the design card keeps at the top of the repository are inside the namespace
    for module in ("netsum/controller/cli.py", "netsum/workers/cli.py", "netsum/p4c/cli.py",
                   "netsum/switch/cli.py", "netsum/wire/__init__.py", "netsum/schema/__init__.py",
                   "netsum/programs/netsum.p4", "netsum/p4c/p4include/v1model.p4",
                   "netsum/switch/native/ioloop.c"):
        assert module in names, module
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for line in ("netsum-p4c = netsum.p4c.cli:main", "netsum-switch = netsum.switch.cli:main",
                 "netsum-worker = netsum.workers.cli:main", "netsum-ctl = netsum.ctl:main"):
        assert line in text, text


def test_installed_wheel_runs_the_demo_elsewhere(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the project's dependencies (numpy, grpcio, ...) without its editable netsum
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "install", "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "no such option: --python" in proc.stderr:
        pytest.skip("this pip cannot install into another environment (--python)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    env.pop("NETSUM_BUILD_DIR", None)
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import netsum.controller, netsum.paths as p; "
                            "print(netsum.controller.__file__); print(p.CHECKOUT)"],
                           cwd=work, capture_output=True, text=True, env=env, check=True)
    module_file, checkout = where.stdout.split()
    assert Path(module_file).is_relative_to(venv), module_file
    assert checkout == "None"
    demo = subprocess.run([str(venv / "bin" / "netsum"), "demo", "--mode", "udp", "--workers", "2",
                           "--size", "64KB", "--out", str(work / "out")], cwd=work,
                          capture_output=True, text=True, env=env, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert (work / "out" / "results.csv").is_file()
    # the P4 build went to the user's cache, not next to the installed package
    assert list((tmp_path / "cache" / "netsum" / "build" / "p4").glob("netsum*.json"))
