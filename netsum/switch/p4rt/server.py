"""The gRPC face of the embedded switch: `P4RuntimeServer(device, address)`.

Thin by design: each RPC checks device id and arbitration (PI's rules, `pi_server.cpp`), hands
the request to `DeviceService`, and turns `P4RTError` into a gRPC status in one place
(`_abort`).  StreamChannel runs one reader thread per stream; everything sent to a stream
(arbitration notices, PacketIn, StreamError) goes through that stream's queue, so notifications
triggered by another stream or by the data plane never write to a gRPC stream concurrently.

The default address is loopback (simple_switch_grpc binds 0.0.0.0:9559): an emulator has no
reason to accept control connections from other machines unless asked.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any, NoReturn

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from netsum.switch.errors import Code
from netsum.switch.p4rt.arbitration import MAX_CONNECTIONS, Arbitrator, Connection, election_id_of
from netsum.switch.p4rt.queue_service import queue_handler
from netsum.switch.p4rt.errors import P4RTError, batch_status, code_and_message
from netsum.switch.p4rt.service import NO_PIPELINE, DeviceService

__all__ = ["P4RuntimeServer", "P4RuntimeServicer", "API_VERSION"]

log = logging.getLogger(__name__)

#: What PI's Capabilities answers (its protos are 1.3-era); p4runtime-shell only displays it.
API_VERSION = "1.3.0"
#: Entities per ReadResponse (~1 MB for typical entities).
READ_CHUNK = 16384
_CLOSE = object()


def _abort(context: grpc.ServicerContext, exc: BaseException) -> NoReturn:
    code, message = code_and_message(exc)
    if code == Code.INTERNAL:
        log.exception("P4Runtime request failed with an internal error")
    context.abort(_grpc_code(code), message)
    raise AssertionError("unreachable")  # context.abort raises


def _grpc_code(code: Code) -> grpc.StatusCode:
    return next(c for c in grpc.StatusCode if c.value[0] == int(code))


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device: Any) -> None:
        self.device = device
        self.device_id: int = device.device_id
        self.service = DeviceService(device)
        self.arbitrator = Arbitrator(self.device_id)
        # The sync gRPC server gives each open StreamChannel a pool thread for its whole life,
        # arbitrated or not: without a cap, a few dozen clients that open a stream and never
        # arbitrate (or hang) would take every thread and starve Write and Read.  PI caps
        # arbitrated connections at 16; the same cap on open streams keeps half the pool for
        # unary RPCs (P4RuntimeServer's max_workers is 32).
        self._streams = threading.BoundedSemaphore(MAX_CONNECTIONS)
        device.packet_in_handler = self.on_packet_in

    # ---------------------------------------------------------------- unary RPCs
    def _check_writer(self, request: Any) -> None:
        if request.role:
            raise P4RTError(Code.UNIMPLEMENTED, "Roles are not supported: leave `role` unset")
        self.arbitrator.check_writer(request.HasField("election_id"),
                                     election_id_of(request.election_id))

    def Write(self, request: p4runtime_pb2.WriteRequest, context: grpc.ServicerContext
              ) -> p4runtime_pb2.WriteResponse:
        try:
            if request.device_id != self.device_id:
                # PI keeps per-device state: an unknown device has no primary and no pipeline.
                if request.HasField("election_id"):
                    raise P4RTError(Code.PERMISSION_DENIED, "Not primary")
                raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
            self._check_writer(request)
            if not self.service.has_pipeline():
                raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError(Code.UNIMPLEMENTED,
                                "Only CONTINUE_ON_ERROR atomicity is supported")
            results = self.service.write(request.updates)
        except Exception as exc:  # noqa: BLE001 - reported as the RPC status
            _abort(context, exc)
        if any(code != Code.OK for code, _ in results):
            status = batch_status(results)
            context.abort_with_status(_RichStatus(status))
        return p4runtime_pb2.WriteResponse()

    def Read(self, request: p4runtime_pb2.ReadRequest, context: grpc.ServicerContext
             ) -> Iterator[p4runtime_pb2.ReadResponse]:
        try:
            if request.device_id != self.device_id:
                raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
            if request.role:
                raise P4RTError(Code.UNIMPLEMENTED, "Roles are not supported: leave `role` unset")
            found = self.service.read(request.entities)
        except Exception as exc:  # noqa: BLE001 - reported as the RPC status
            _abort(context, exc)
        # PI answers with one ReadResponse holding every entity; so do we, up to a size that
        # stays far below gRPC's default 4 MB receive limit (a wildcard register read of a big
        # program would exceed it), beyond which the spec's streaming of several responses is
        # used.
        for start in range(0, max(len(found), 1), READ_CHUNK):
            yield p4runtime_pb2.ReadResponse(entities=found[start:start + READ_CHUNK])

    def SetForwardingPipelineConfig(self, request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext
                                    ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        try:
            if request.device_id != self.device_id:
                if request.HasField("election_id"):
                    raise P4RTError(Code.PERMISSION_DENIED, "Not primary")
                raise P4RTError(Code.UNKNOWN, f"Invalid device id {request.device_id} (this switch "
                                f"is device {self.device_id})")
            self._check_writer(request)
            self.service.set_pipeline(
                request.action, request.config if request.HasField("config") else None)
        except Exception as exc:  # noqa: BLE001 - reported as the RPC status
            _abort(context, exc)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: p4runtime_pb2.GetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext
                                    ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        try:
            if request.device_id != self.device_id:
                raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
            config = self.service.get_pipeline(request.response_type)
        except Exception as exc:  # noqa: BLE001 - reported as the RPC status
            _abort(context, exc)
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    def Capabilities(self, request: p4runtime_pb2.CapabilitiesRequest,
                     context: grpc.ServicerContext) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ---------------------------------------------------------------- StreamChannel
    def StreamChannel(self, request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
                      context: grpc.ServicerContext
                      ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        if not self._streams.acquire(blocking=False):
            _abort(context, P4RTError(Code.RESOURCE_EXHAUSTED, "Too many connections"))
        try:
            yield from self._stream(request_iterator, context)
        finally:
            self._streams.release()

    def _stream(self, request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
                context: grpc.ServicerContext) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        outbox: queue.Queue[Any] = queue.Queue()
        conn = self.arbitrator.connect(outbox.put)
        reader = threading.Thread(target=self._read_stream, args=(conn, request_iterator, outbox),
                                  name=f"p4rt-stream-{conn.cid}", daemon=True)
        reader.start()
        try:
            while True:
                item = outbox.get()
                if item is _CLOSE:
                    return
                if isinstance(item, P4RTError):
                    _abort(context, item)
                yield item
        finally:
            self.arbitrator.disconnect(conn)

    def _read_stream(self, conn: Connection, requests: Iterator[Any], outbox: queue.Queue[Any]
                     ) -> None:
        try:
            for request in requests:
                kind = request.WhichOneof("update")
                if kind == "arbitration":
                    try:
                        self.arbitrator.arbitrate(conn, request.arbitration)
                    except P4RTError as exc:
                        # Errors in arbitration end the stream with that status, as in PI.
                        outbox.put(exc)
                        return
                elif kind == "packet":
                    self._packet_out(conn, request.packet)
                # digest_ack / other: nothing to do (no digests on this switch).
        except grpc.RpcError:
            pass  # client went away
        except Exception:  # noqa: BLE001 - a bug must not kill the server; close this stream
            log.exception("StreamChannel reader failed")
        finally:
            self.arbitrator.disconnect(conn)
            outbox.put(_CLOSE)

    def _packet_out(self, conn: Connection, packet: p4runtime_pb2.PacketOut) -> None:
        try:
            if not self.arbitrator.is_primary(conn):
                raise P4RTError(Code.PERMISSION_DENIED, "Not primary: PacketOut ignored")
            self.service.packet_out(packet)
        except Exception as exc:  # noqa: BLE001 - reported to the client as a StreamError
            code, message = code_and_message(exc)
            msg = p4runtime_pb2.StreamMessageResponse()
            msg.error.canonical_code = int(code)
            msg.error.message = message
            msg.error.packet_out.packet_out.CopyFrom(packet)
            conn.send(msg)

    def on_packet_in(self, frame: bytes) -> None:
        """Called by the data plane for each frame sent to the CPU port."""
        try:
            packet = self.service.packet_in(frame)
        except Exception:  # noqa: BLE001 - never break the packet path
            log.exception("PacketIn decoding failed")
            return
        primary = self.arbitrator.primary()
        if packet is None or primary is None:
            return
        primary.send(p4runtime_pb2.StreamMessageResponse(packet=packet))


class _RichStatus(grpc.Status):
    """A grpc.Status carrying google.rpc.Status details (what grpcio-status would build)."""

    def __init__(self, status: Any) -> None:
        self.code = _grpc_code(Code(status.code))
        self.details = status.message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


class P4RuntimeServer:
    """A P4Runtime gRPC server for one device.  `address` port 0 picks a free port."""

    def __init__(self, device: Any, address: str = "127.0.0.1:9559", max_workers: int = 32
                 ) -> None:
        self.device = device
        self.address = address
        self.servicer = P4RuntimeServicer(device)
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt")
        self._server = grpc.server(self._executor)
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self._server)
        if hasattr(device, "set_queue_rate"):
            self._server.add_generic_rpc_handlers((queue_handler(device),))
        self.port = self._server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"P4Runtime server: cannot bind {address}")

    def start(self) -> "P4RuntimeServer":
        self._server.start()
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop serving; open streams end with UNAVAILABLE.  Idempotent."""
        self._server.stop(grace).wait()
        self._executor.shutdown(wait=False)
        if self.device.packet_in_handler == self.servicer.on_packet_in:
            self.device.packet_in_handler = None

    def wait(self) -> None:
        self._server.wait_for_termination()
