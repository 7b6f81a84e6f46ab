"""Privileged: netsum under Mininet (netsum/experiments/mnswitch.py, mininet/allreduce_experiment.py).

Real Mininet hosts and links, real netsum-switch processes on the switch interfaces, the real
controller over P4Runtime, real netsum-worker processes on the hosts' kernel UDP stacks.  Each
test also checks that what it started is gone afterwards: switch and worker processes, and the
interfaces Mininet made.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import built_netsum

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

MN_DIR = ROOT / "mininet"
SCRIPT = MN_DIR / "allreduce_experiment.py"
SINGLE = ROOT / "examples" / "single.yaml"
TREE = ROOT / "examples" / "tree.yaml"


def _environment_problem() -> str | None:
    from netsum.experiments import mnenv
    return mnenv.environment_problem()


@pytest.fixture(scope="module")
def mn() -> Iterator[Any]:
    """The mnswitch module (importing it imports Mininet: only once Mininet can run)."""
    problem = _environment_problem()
    if problem:
        pytest.skip(problem)
    from netsum.experiments import mnswitch
    yield mnswitch


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _mine(names: set[str], switches: tuple[str, ...]) -> set[str]:
    # Switch-side interfaces stay in the root namespace (`s1-eth1`); hosts' ends moved into
    # their namespaces and die with them.
    return {n for n in names if any(n.startswith(f"{s}-eth") for s in switches)}


def test_real_mininet_package_is_not_shadowed(privileged: None, mn: Any) -> None:
    """From the checkout's root, `import mininet` must still be Debian's package: the repo's
    mininet/ folder has no __init__.py exactly so that it never wins."""
    assert not (MN_DIR / "__init__.py").exists()
    out = subprocess.run([sys.executable, "-c", "import mininet.net, mininet; "
                          "print(mininet.__file__)"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip().startswith(str(MN_DIR))


@pytest.mark.parametrize("topo_file, pairs, bmv2_style", [
    (SINGLE, (("h1", "h2"), ("h4", "h1")), False),
    # leaf1 -> root -> leaf2 and back: the switch-to-switch Mininet links carry L2 too.
    (TREE, (("h1", "h3"), ("h4", "h2")), False),
    # The simple_switch_grpc conventions of NetsumSwitch (a gRPC port chosen up front, waiting
    # for it to accept instead of a ready line), run with netsum-switch under that name: it
    # takes simple_switch_grpc's command line.
    (SINGLE, (("h2", "h3"),), True),
], ids=["single", "tree", "bmv2-conventions"])
def test_ping_through_netsum_l2_forwarding(privileged: None, mn: Any, tmp_path: Path,
                                           topo_file: Path, pairs: tuple[tuple[str, str], ...],
                                           bmv2_style: bool) -> None:
    from mininet.link import TCLink
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from netsum.controller.topology import load_topology

    info_path, json_path = built_netsum(32)
    topo = load_topology(topo_file)
    names = tuple(sw.name for sw in topo.switches)
    params: dict[str, Any] = {"logDir": str(tmp_path)}
    if bmv2_style:
        fake = tmp_path / "simple_switch_grpc"
        fake.symlink_to(Path(sys.executable).parent / "netsum-switch")
        params["executable"] = [str(fake)]
    setLogLevel("warning")
    net = Mininet(topo=mn.TopoFromFile(topo, freeGrpc=True, **params),
                  switch=mn.NetsumSwitch, link=TCLink, controller=None, autoSetMacs=False,
                  build=False, waitConnected=False)
    ctl = None
    try:
        net.build()
        net.start()
        switches = [net.get(n) for n in names]
        for sw in switches:
            assert sw.alive() and sw.grpcAddress.startswith("127.0.0.1:")
            assert not sw.grpcAddress.endswith(":0")
            assert sw.isBmv2 is bmv2_style
            ports = topo.switch(sw.name).ports
            assert sw.dataPorts() == [(p, f"{sw.name}-eth{p}") for p in ports]
            # simple_switch_grpc has no ready line: there start() waits for the gRPC port.
            assert bmv2_style or "ready:" in sw.logPath.read_text()
        mn.configure_hosts(net, topo)
        first, second = (net.get(n) for n in pairs[0])
        # No pipeline yet: the switch drops everything, so a ping cannot get through.
        assert "0 received" in first.cmd("ping", "-c1", "-W1", second.IP())
        # That ping's unanswered ARP would fail the next ping while it keeps retrying (3 s);
        # flushing keeps the permanent service-address entry (flush skips permanent ones).
        first.cmd("ip", "neigh", "flush", "dev", first.defaultIntf().name)
        service = topo.switch(topo.host(pairs[0][0]).switch).service
        neigh = first.cmd("ip", "neigh", "show", mn.ipv4_text(service.ipv4))
        assert mn.mac_text(service.mac) in neigh and "PERMANENT" in neigh, neigh
        assert "off" in first.cmd("ethtool", "-k", first.defaultIntf().name, "|", "grep",
                                  "tx-checksumming")
        ctl = mn.start_controller(mn.with_grpc_addrs(topo, net), info_path, json_path)
        # ARP goes through the flood group, echo and reply through dmac entries.
        for src, dst in pairs:
            out = net.get(src).cmd("ping", "-c2", "-i0.2", "-W2", net.get(dst).IP())
            assert " 0% packet loss" in out, out
        procs = [sw.process for sw in switches]
    finally:
        if ctl is not None:
            ctl.close()
        net.stop()
    assert all(p.poll() is not None for p in procs)
    assert not _mine(_links(), names)


@pytest.mark.parametrize("executable, message", [
    (["/bin/false"], "switch s1 exited at start (status 1)"),
    (["/nonexistent/netsum-switch"], "switch s1: cannot run /nonexistent/netsum-switch: "),
])
def test_switch_that_cannot_start_is_one_error(privileged: None, mn: Any, tmp_path: Path,
                                               executable: list[str], message: str) -> None:
    from mininet.link import TCLink
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from netsum.controller.topology import load_topology

    setLogLevel("critical")
    topo = load_topology(SINGLE)
    net = Mininet(topo=mn.TopoFromFile(topo, freeGrpc=True, logDir=str(tmp_path),
                                       executable=executable),
                  switch=mn.NetsumSwitch, link=TCLink, controller=None, autoSetMacs=False,
                  build=False, waitConnected=False)
    try:
        net.build()
        with pytest.raises(mn.NetsumMininetError) as err:
            net.start()
        assert message in str(err.value)
    finally:
        net.stop()
        setLogLevel("warning")
    assert not _mine(_links(), ("s1",))


def _run_script(tmp_path: Path, *args: str,
                stdin: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    out_dir = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(out_dir)],
                          capture_output=True, text=True, timeout=90, input=stdin)
    return proc, out_dir


def _check_results(out_dir: Path, workers: list[str]) -> list[dict[str, str]]:
    with open(out_dir / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["host"] for r in rows] == workers
    assert all(r["ok"] == "True" for r in rows), rows
    assert all(int(r["packets_sent"]) > 0 for r in rows)
    assert (out_dir / "allreduce.png").stat().st_size > 0
    return rows


def _check_nothing_left(out_dir: Path) -> None:
    manifest = json.loads((out_dir / "run.json").read_text())
    pids = [s["pid"] for s in manifest["switches"].values()] + list(manifest["workers"].values())
    assert pids and not [p for p in pids if _alive(p)]
    interfaces = {i for s in manifest["switches"].values() for i in s["interfaces"]}
    assert interfaces and not interfaces & _links()


def test_allreduce_single_switch_four_workers(privileged: None, mn: Any,
                                              tmp_path: Path) -> None:
    # --cli: Mininet's CLI reads these commands from stdin, then EOF lets the job run.
    proc, out_dir = _run_script(tmp_path, "--topo", str(SINGLE), "--size", "4000e",
                                "--bw", "100", "--cli", stdin="h3 ping -c1 -W2 h1\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Mininet's CLI output goes through its logger, to stderr.
    assert "1 packets transmitted, 1 received" in proc.stdout + proc.stderr
    assert "all results correct" in proc.stdout
    assert "Traceback" not in proc.stderr
    _check_results(out_dir, ["h1", "h2", "h3", "h4"])
    _check_nothing_left(out_dir)


def test_allreduce_two_level_tree_with_loss(privileged: None, mn: Any, tmp_path: Path) -> None:
    """examples/tree.yaml: leaves aggregate their workers and send partials up to the root over
    Mininet links; the drop simulator loses 3% per worker port and direction."""
    proc, out_dir = _run_script(tmp_path, "--topo", str(TREE), "--size", "3000e",
                                "--loss", "0.03", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _check_results(out_dir, ["h1", "h2", "h3", "h4"])
    assert sum(int(r["retransmissions"]) for r in rows) > 0
    counters = dict(kv.split("=") for kv in
                    proc.stdout.split("switch counters: ")[1].split("\n")[0].split(", "))
    assert int(counters["partials_up"]) > 0       # the leaves really sent partial sums up
    _check_nothing_left(out_dir)


@pytest.mark.parametrize("args, message", [
    (["--topo", "/nonexistent/topo.yaml"], "cannot read topology file"),
    (["--topo", str(ROOT / "README.md")], "not valid YAML/JSON"),
    (["--topo", str(SINGLE), "--job", "9"], "no job 9 (jobs: 1, 2)"),
])
def test_bad_input_is_one_line(privileged: None, mn: Any, tmp_path: Path, args: list[str],
                               message: str) -> None:
    proc, _ = _run_script(tmp_path, *args)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert proc.stderr.startswith("allreduce_experiment: error: ")


def test_not_root_is_one_line(tmp_path: Path) -> None:
    """Runs unprivileged too: the refusal names the reason instead of Mininet's own exit."""
    if os.geteuid() == 0:
        runner = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        if subprocess.run(["which", "setpriv"], capture_output=True).returncode != 0:
            pytest.skip("setpriv is not installed (to drop root)")
        probe = subprocess.run([*runner, sys.executable, "-c",
                                "import sys, netsum.cli; open(sys.argv[1]).close()",
                                str(SCRIPT)], capture_output=True, text=True, cwd="/")
        if probe.returncode != 0:
            pytest.skip("user nobody cannot read this checkout or its venv: "
                        f"{probe.stderr.strip().splitlines()[-1:] or 'no access'}")
    else:
        runner = []
    proc = subprocess.run([*runner, sys.executable, str(SCRIPT), "--topo", str(SINGLE),
                           "--out", str(tmp_path / "x")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip() == ("allreduce_experiment: error: Mininet needs root (network "
                                   "namespaces, veth pairs, raw sockets)")


def test_leftover_interface_is_one_line(privileged: None, mn: Any, tmp_path: Path) -> None:
    """An interface a killed run left behind (here made on purpose) stops Mininet's build:
    one line naming it, and the part Mininet had built is removed."""
    peer = f"mnleft{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", "s1-eth1", "type", "veth", "peer", "name", peer],
                   check=True, capture_output=True)
    try:
        proc, _ = _run_script(tmp_path, "--topo", str(SINGLE), "--size", "1000e")
    finally:
        subprocess.run(["ip", "link", "del", "s1-eth1"], capture_output=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "s1-eth1" in proc.stderr and "File exists" in proc.stderr
    assert not _mine(_links(), ("s1",)) and peer not in _links()
