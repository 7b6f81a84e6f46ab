"""Queue settings from outside the switch: netsum-ctl set_queue_depth / set_queue_rate over the
switch's gRPC address (simple_switch_CLI's verbs), and netsum-switch's --queue-* options."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import embedded_server
from netsum.switch.cli import UsageError, parse_args


def ctl(port: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netsum.controller.cli", "--grpc-addr",
                           f"127.0.0.1:{port}", "--device-id", "4", *argv],
                          capture_output=True, text=True, timeout=60)


def test_netsum_ctl_sets_depth_and_rate() -> None:
    with embedded_server(4) as (dev, srv):
        r = ctl(srv.port, "set_queue_rate", "250", "2")
        assert r.returncode == 0, r.stderr
        assert "port 2" in r.stdout and dev.queue_config.rate_of(2) == 250
        assert dev.queue_config.rate_of(3) == 0
        r = ctl(srv.port, "set_queue_depth", "16")
        assert r.returncode == 0, r.stderr
        assert dev.queue_config.depth_of(2) == 16 and dev.queue_config.depth_of(9) == 16
        r = ctl(srv.port, "set_queue_depth", "0")
        assert r.returncode != 0 and "outside" in r.stderr and len(r.stderr.splitlines()) == 1


def test_switch_options() -> None:
    o = parse_args(["--no-p4", "--", "--queue-rate", "100", "--queue-rate", "3:5",
                    "--queue-depth", "3:8"])
    assert o.queue_rates == ((None, 100), (3, 5)) and o.queue_depths == ((3, 8),)
    for bad in (["--queue-rate", "x"], ["--queue-depth", "600:4"], ["--queue-depth", "0"]):
        with pytest.raises(UsageError):
            parse_args(["--no-p4", "--", *bad])
