"""Egress queue settings of a switch: simple_switch_CLI's `set_queue_depth` / `set_queue_rate`;
and the embedded switch's data-plane statistics (`get_stats`).

P4Runtime has no queue API; bmv2 takes these over Thrift (`simple_switch_CLI`).  The embedded
switch serves them as `netsum.v1.SwitchConfig` beside P4Runtime on the same gRPC address (JSON
bodies, see the switch's docs/switch.md).  A switch without that service (real
simple_switch_grpc) answers UNIMPLEMENTED, reported as such.  Nothing the controller installs
depends on this service: runs and tests read the statistics to check a switch's health.
"""
from __future__ import annotations

from typing import Any

from netsum.controller.errors import ControllerError
from netsum.p4rt.client import Endpoint, call_json
from netsum.p4rt.errors import SwitchUnreachable

__all__ = ["set_queue_depth", "set_queue_rate", "get_queues", "get_stats"]

SERVICE = "/netsum.v1.SwitchConfig/"


def _call(endpoint: Endpoint, method: str, body: dict[str, Any], timeout: float
          ) -> dict[str, Any]:
    body = dict(body, device_id=endpoint.device_id)
    try:
        return call_json(endpoint, SERVICE + method, body, timeout)
    except ControllerError as exc:
        if exc.code == "UNAVAILABLE":
            raise SwitchUnreachable(f"no switch answers at {endpoint.address}") from None
        if exc.code == "UNIMPLEMENTED":
            if method == "GetStats":
                raise ControllerError(f"switch {endpoint.address} does not serve its "
                                      "data-plane statistics (not the embedded switch)") from None
            raise ControllerError(f"switch {endpoint.address} has no queue settings service "
                                  "(on simple_switch_grpc use simple_switch_CLI "
                                  f"{method[:3].lower()}_queue_...)") from None
        raise ControllerError(f"{method} on {endpoint.address} failed: "
                              f"{exc.code or 'error'}: {exc.detail or exc}") from None


def set_queue_depth(endpoint: Endpoint, packets: int, port: int | None, timeout: float = 5.0
                    ) -> dict[str, Any]:
    return _call(endpoint, "SetQueueDepth", {"packets": packets, "port": port}, timeout)


def set_queue_rate(endpoint: Endpoint, pps: int, port: int | None, timeout: float = 5.0
                   ) -> dict[str, Any]:
    return _call(endpoint, "SetQueueRate", {"pps": pps, "port": port}, timeout)


def get_queues(endpoint: Endpoint, timeout: float = 5.0) -> dict[str, Any]:
    return _call(endpoint, "GetQueues", {}, timeout)


def get_stats(endpoint: Endpoint, timeout: float = 5.0) -> dict[str, Any]:
    """{"stats": {name: count}, "first_error": str | None} of the embedded switch (its
    netsum/switch/stats.py counters and the first internal error's message)."""
    return _call(endpoint, "GetStats", {}, timeout)
