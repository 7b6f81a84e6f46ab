"""Kernel-UDP workers in network namespaces against the real stack: netsum-switch on veth
ports running netsum.p4, configured by `netsum-ctl setup`, and two `netsum-worker --udp`
processes inside the namespaces, each checking the sum.  Privileged: skipped with the reason
when namespaces cannot be made.  Everything created is deleted afterwards."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import BIN, SwitchDaemon, assert_switch_clean, built_netsum
from netsum.procs import ProcessGroup

ROOT = Path(__file__).resolve().parents[2]
SERVICE_MAC, SERVICE_IP = "02:00:00:00:00:fe", "10.0.0.254"
#: The switch build and the workers' K, explicitly (not the default).
K = 32


@pytest.mark.privileged
@pytest.mark.slow
def test_kernel_udp_workers_through_netsum_switch(lab, tmp_path: Path) -> None:  # type: ignore
    p4info, json_path = built_netsum(K)
    hosts = [lab.add_host(i, f"02:00:00:00:00:0{i}", f"10.0.0.{i}",
                          arp={SERVICE_IP: SERVICE_MAC}) for i in (1, 2)]
    with ProcessGroup(tmp_path / "logs") as procs:
        daemon = SwitchDaemon(procs, [f"{i}@{h.switch_if}" for i, h in enumerate(hosts, 1)])
        daemon.start()
        run_workers(hosts, daemon.grpc_addr, tmp_path, json_path, p4info)


def run_workers(hosts: list[Any], grpc: str, tmp_path: Path, json_path: Path,
                p4info: Path) -> None:
    """Set the switch up with `netsum-ctl setup`; two kernel-UDP workers check their sums."""
    topo = {
        "switches": [{"name": "s1", "grpc_addr": grpc, "device_id": 0,
                      "ports": [1, 2], "service": {"mac": SERVICE_MAC, "ipv4": SERVICE_IP},
                      "slots": 256}],
        "hosts": [{"name": f"h{i}", "mac": h.mac, "ipv4": h.ipv4, "switch": "s1", "port": i}
                  for i, h in enumerate(hosts, 1)],
        "jobs": [{"id": 1, "workers": ["h1", "h2"], "slots": 64}],
    }
    topo_path = tmp_path / "topo.yaml"
    topo_path.write_text(yaml.safe_dump(topo))
    setup = subprocess.run([str(BIN / "netsum-ctl"), "--topo", str(topo_path), "--p4info",
                            str(p4info), "setup", str(json_path)],
                           capture_output=True, text=True, timeout=60)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    workers = []
    for rank, h in enumerate(hosts):
        cmd = [str(BIN / "netsum-worker"), "--job", "1", "--workers", "2", "--slots", "64",
               "--k", str(K), "--udp", SERVICE_IP, "--bind", h.ipv4, "--size", "20000",
               "--seed", "5",
               "--rank", str(rank), "--check", "--iterations", "2", "--timeout", "20"]
        workers.append(subprocess.Popen(h.exec_argv(cmd), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True,
                                        env=dict(os.environ, PYTHONPATH=str(ROOT))))
    for w in workers:
        out, _ = w.communicate(timeout=120)
        assert w.returncode == 0 and out.count("check ok") == 2, out
    # no exception on the packet path, no fault counter moved
    assert_switch_clean(grpc)
