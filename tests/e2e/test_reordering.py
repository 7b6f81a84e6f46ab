"""Exact sums whatever the network does: 4 netsum-worker processes through a netsum-switch
daemon (UDP-tunnel ports, set up by netsum-ctl), every link of them impaired in both
directions by a test-side relay on real sockets (tests/impair.py): 10 % loss, 10 %
duplication, each datagram overtaken by up to 63 later ones (and 0.5 % of them held back for
up to 2000, as an old duplicate that turns up late).  32,000 DATA uses in all (~10^5
datagrams through the relays; ~100 late copies refused as stale): a switch that adds an older
round's DATA instead of dropping it fails at this size.  It was 10^5 uses, three times as long.

Expectations from the inputs alone, computed here without the workers' quantizer: each
block's agreed exponent (max over workers of the least e with 2^e >= max|x|), the int32
quantized inputs q = rint(x * 2^(s - E)), their integer sum per block.  Every RESULT the
switch emits -- checked as it leaves the switch, before the relay impairs it -- carries
exactly that sum (bootstrap rounds: zeros), and every worker's result is that sum dequantized,
bit for bit.  The switch's drop_stale counter shows late copies met newer rounds and were
refused."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import BIN, SwitchDaemon, assert_switch_clean, built_netsum, free_udp_ports
from exactsums import ResultCheck, dequantized, expected_sums
from impair import ImpairedNet
from netsum.procs import ProcessGroup
from netsum.tensors import synthetic_inputs

WORKERS, K, SLOTS = 4, 32, 32
USES = 8_000                                   # per worker: 32,000 in all
BLOCKS = USES - SLOTS                          # every slot's first use is its bootstrap
ELEMENTS = BLOCKS * K
SERVICE = ("02:00:00:00:01:00", "10.0.0.254")


@pytest.mark.slow
def test_loss_duplication_and_reordering_on_every_link(tmp_path: Path) -> None:
    p4info, json_path = built_netsum(K)
    xs = synthetic_inputs(WORKERS, (ELEMENTS,), seed=11)
    agreed, sums = expected_sums(xs, K)
    check = ResultCheck(sums, SLOTS, K)

    procs = ProcessGroup(tmp_path / "logs")
    peers, workers = free_udp_ports(WORKERS), free_udp_ports(WORKERS)
    daemon = SwitchDaemon(procs, [f"{i + 1}@udp:127.0.0.1:0=127.0.0.1:{p}"
                                  for i, p in enumerate(peers)])
    with procs:
        ready = daemon.start()
        topo = tmp_path / "topo.yaml"
        topo.write_text(yaml.safe_dump({
            "switches": [{"name": "s1", "grpc_addr": daemon.grpc_addr, "device_id": 0,
                          "ports": list(range(1, WORKERS + 1)),
                          "service": {"mac": SERVICE[0], "ipv4": SERVICE[1]}, "slots": 1024}],
            "hosts": [{"name": f"h{i}", "mac": f"02:00:00:00:00:0{i}", "ipv4": f"10.0.0.{i}",
                       "switch": "s1", "port": i} for i in range(1, WORKERS + 1)],
            "jobs": [{"id": 7, "workers": [f"h{i}" for i in range(1, WORKERS + 1)],
                      "slots": SLOTS}]}))
        r = subprocess.run([str(BIN / "netsum-ctl"), "--topo", str(topo), "--p4info",
                            str(p4info), "setup", str(json_path)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        switch_ports = [ready.udp_ports[i + 1] for i in range(WORKERS)]
        with ImpairedNet(switch_ports, peers, workers, seed=5, late=0.005,
                         check=check) as net:
            children = []
            for rank in range(WORKERS):
                src = tmp_path / f"in{rank}.npy"
                np.save(src, xs[rank])
                host, port = net.worker_side[rank]
                children.append(procs.start(f"w{rank}", [
                    str(BIN / "netsum-worker"), "--job", "7", "--workers", str(WORKERS),
                    "--slots", str(SLOTS), "--k", str(K), "--frames", f"{host}:{port}",
                    "--bind", f"127.0.0.1:{workers[rank]}", "--mac", f"02:00:00:00:00:0{rank + 1}",
                    "--ip", f"10.0.0.{rank + 1}", "--service-mac", SERVICE[0],
                    "--service-ip", SERVICE[1], "--input", str(src),
                    "--output", str(tmp_path / f"out{rank}.npy"), "--timeout", "60", "--json"]))
            for c in children:
                c.popen.wait(timeout=1800)
            totals = net.totals()
        assert not net.errors, net.errors
        logs = [c.log_path.read_text() if c.log_path else "" for c in children]
        assert all(c.popen.returncode == 0 for c in children), logs
        stats = [json.loads(next(ln for ln in log.splitlines() if ln.startswith("{")))
                 for log in logs]
        row = json.loads(subprocess.run(
            [str(BIN / "netsum-ctl"), "--json", "--topo", str(topo), "--p4info", str(p4info),
             "stats"], capture_output=True, text=True, timeout=60).stdout)[0]
        assert_switch_clean(daemon.grpc_addr)
    # every RESULT the switch sent was the integer sum of its round
    assert not check.bad, check.bad[:5]
    checked = check.checked
    assert checked["data"] >= WORKERS * BLOCKS and checked["bootstrap"] >= WORKERS * SLOTS
    # every worker's sum: the expected integers dequantized, bit for bit
    truth = dequantized(agreed, sums, WORKERS)
    for rank in range(WORKERS):
        assert np.array_equal(np.load(tmp_path / f"out{rank}.npy"), truth), rank
    # the network really did all of it, and the switch refused what came too late
    assert sum(s["packets_sent"] - s["retransmissions"] for s in stats) == WORKERS * USES
    assert totals["lost"] > 0.08 * totals["seen"] and totals["duplicated"] > 0.08 * totals["seen"]
    assert row["drop_stale"] > 0 and row["retx"] > 0
    assert all(row[c] == 0 for c in ("drop_non_member", "drop_bad_slot", "drop_unknown_job",
                                      "drop_bad_type", "drop_malformed", "drop_result_port"))
    print(f"\nreordering test: {totals}, RESULTs checked {checked}, switch {row}")
