"""The switch's queue settings over gRPC: what simple_switch_CLI's Thrift `set_queue_depth` /
`set_queue_rate` do for bmv2, here as a small service beside P4Runtime on the same server
(P4Runtime itself has no queue API).  Service `netsum.v1.SwitchConfig`, unary methods with JSON
bodies (no generated code on either side):

    SetQueueDepth {"device_id": N, "packets": P, "port": PORT | null}  -> {"queues": ...}
    SetQueueRate  {"device_id": N, "pps": R, "port": PORT | null}      -> {"queues": ...}
    GetQueues     {"device_id": N}                                     -> {"queues": ...}
    GetStats      {"device_id": N}      -> {"stats": {name: count}, "first_error": str | null,
                                            "native": str | null, "io_loop": str,
                                            "udp_gso": {name: count} | null}

GetStats is the device's data-plane statistics (netsum/switch/stats.py: internal errors, parser
errors, datagrams refused on UDP-tunnel ports, ...) and the first internal error's message,
which P4Runtime has no place for; runs read them to fail on what should never happen.
`native` is the pipeline's native_status, `io_loop` which port loop runs and why
(netsum/switch/native/io.py), `udp_gso` the C loop's GSO/GRO counters (coalesced buffers
received and their datagrams, GSO sends and their datagrams, refused sends; null before the
C loop is loaded).

`port` null means every port; rate 0 means not limited.  `queues` reports
{"depth": {"*": 64, "3": 16}, "rate": {"3": 100}}.  Like bmv2's Thrift server it has no access
control beyond the listening address (loopback by default).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc

from netsum.switch.jsonload import strict_loads

__all__ = ["SERVICE", "queue_handler", "encode", "decode"]

SERVICE = "netsum.v1.SwitchConfig"


def encode(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def decode(data: bytes) -> Any:
    return strict_loads(data, max_bytes=1 << 16)


def _report(device: Any) -> dict[str, Any]:
    cfg = device.queue_config
    key = (lambda p: "*" if p is None else str(p))
    return {"depth": {key(p): v for p, v in cfg.depth.items()},
            "rate": {key(p): v for p, v in cfg.rate.items()}}


def queue_handler(device: Any) -> grpc.GenericRpcHandler:
    def call(fn: Callable[[dict[str, Any]], None]) -> Callable[[Any, Any], Any]:
        def handle(request: Any, context: Any) -> Any:
            if not isinstance(request, dict):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "request must be a JSON object")
            if request.get("device_id", 0) != device.device_id:
                context.abort(grpc.StatusCode.NOT_FOUND,
                              f"no device {request.get('device_id')!r} here")
            try:
                fn(request)
            except (ValueError, TypeError) as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            return {"queues": _report(device)}
        return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=decode,
                                                   response_serializer=encode)

    def port(req: dict[str, Any]) -> int | None:
        p = req.get("port")
        if p is not None and type(p) is not int:
            raise ValueError(f"port {p!r} is not an integer")
        return p

    def number(req: dict[str, Any], name: str) -> int:
        v = req.get(name)
        if type(v) is not int:
            raise ValueError(f"'{name}' must be an integer, got {v!r}")
        return v

    def stats(request: Any, context: Any) -> Any:
        if not isinstance(request, dict) or request.get("device_id", 0) != device.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such device here")
        pl = device.pipeline
        return {"stats": device.stats.as_dict(), "first_error": device.first_error,
                "native": pl.native_status if pl is not None else None,
                "io_loop": device.io_status,
                "udp_gso": device.udp_gso() if device.udp_gso is not None else None}

    methods = {
        "SetQueueDepth": call(lambda r: device.set_queue_depth(number(r, "packets"), port(r))),
        "SetQueueRate": call(lambda r: device.set_queue_rate(number(r, "pps"), port(r))),
        "GetQueues": call(lambda r: None),
        "GetStats": grpc.unary_unary_rpc_method_handler(stats, request_deserializer=decode,
                                                        response_serializer=encode),
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)
