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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from netsum.switch.errors import Code
from netsum.switch.jsonload import MAX_CONFIG_BYTES
from netsum.switch.p4rt.arbitration import MAX_CONNECTIONS, Arbitrator, Connection, election_id_of
from netsum.switch.p4rt.queue_service import queue_handler
from netsum.switch.p4rt.errors import P4RTError, batch_status, code_and_message
from netsum.switch.p4rt.service import NO_PIPELINE, DeviceService

__all__ = ["P4RuntimeServer", "P4RuntimeServicer", "API_VERSION", "TlsConfig"]

log = logging.getLogger(__name__)

#: What PI's Capabilities answers (its protos are 1.3-era); p4runtime-shell only displays it.
API_VERSION = "1.3.0"
#: Reads served at once.  A Read whose client does not consume its responses holds a pool
#: thread until the client goes away; capped here (with the 16 stream seats) so that such
#: readers never take the threads Write needs: 16 streams + 8 reads leave 8 of the pool's 32.
MAX_READS = 8
#: Period of the digest and idle-timeout timers (netsum.switch.p4rt.digests / ageing).
TICK_S = 0.05
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
        self._reads = threading.BoundedSemaphore(MAX_READS)
        device.packet_in_handler = self.on_packet_in
        device.digest_handler = self.service.digests.learn
        self.service.notify = self._to_primary

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
            if request.ByteSize() > MAX_WRITE_BYTES:
                raise P4RTError(Code.RESOURCE_EXHAUSTED,
                                f"write request of {request.ByteSize()} bytes: more than "
                                f"{MAX_WRITE_BYTES} (send the updates in smaller batches)")
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
             ) -> Iterator[bytes]:
        """Serialized ReadResponses (the Read handler's serializer passes bytes through)."""
        if not self._reads.acquire(blocking=False):
            _abort(context, P4RTError(Code.RESOURCE_EXHAUSTED,
                                      f"Too many Reads in progress (at most {MAX_READS}): "
                                      "consume or cancel the ones open"))
        try:
            if request.device_id != self.device_id:
                _abort(context, P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE))
            if request.role:
                _abort(context, P4RTError(Code.UNIMPLEMENTED,
                                          "Roles are not supported: leave `role` unset"))
            # Lazy: each ReadResponse (<= ~1 MB) is built when gRPC asks for the next one, so
            # a wildcard read of millions of cells streams in flat memory.
            bodies = self.service.read_bodies(request.entities)
            while True:
                try:
                    body = next(bodies, None)
                except Exception as exc:  # noqa: BLE001 - reported as the RPC status
                    _abort(context, exc)
                if body is None:
                    return
                yield body
        finally:
            self._reads.release()

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
                elif kind == "digest_ack":
                    # PI takes acks from the primary only, silently.
                    if self.arbitrator.is_primary(conn):
                        self.service.digests.ack(request.digest_ack)
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

    def _to_primary(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        """DigestList and IdleTimeoutNotification go to the primary only (PI's
        send_stream_message); with no primary they are dropped."""
        primary = self.arbitrator.primary()
        if primary is not None:
            primary.send(msg)

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


def _passthrough(body: bytes) -> bytes:
    return body


def _handlers(servicer: P4RuntimeServicer) -> grpc.GenericRpcHandler:
    """The P4Runtime service's method table (what the generated add_..._to_server builds),
    except that Read's responses are the bytes `DeviceService.read_bodies` serialized."""
    pb = p4runtime_pb2

    def unary(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)

    return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", {
        "Write": unary(servicer.Write, pb.WriteRequest, pb.WriteResponse),
        "Read": grpc.unary_stream_rpc_method_handler(
            servicer.Read, request_deserializer=pb.ReadRequest.FromString,
            response_serializer=_passthrough),
        "SetForwardingPipelineConfig": unary(servicer.SetForwardingPipelineConfig,
                                             pb.SetForwardingPipelineConfigRequest,
                                             pb.SetForwardingPipelineConfigResponse),
        "GetForwardingPipelineConfig": unary(servicer.GetForwardingPipelineConfig,
                                             pb.GetForwardingPipelineConfigRequest,
                                             pb.GetForwardingPipelineConfigResponse),
        "StreamChannel": grpc.stream_stream_rpc_method_handler(
            servicer.StreamChannel, request_deserializer=pb.StreamMessageRequest.FromString,
            response_serializer=pb.StreamMessageResponse.SerializeToString),
        "Capabilities": unary(servicer.Capabilities, pb.CapabilitiesRequest,
                              pb.CapabilitiesResponse),
    })


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """simple_switch_grpc's --grpc-server-ssl options: PEM files of the server's certificate
    and key, and of the CA that signs client certificates (needed when clients must present
    one, --grpc-server-with-client-auth)."""
    cert: Path
    key: Path
    cacert: Path | None = None
    client_auth: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        if self.client_auth and self.cacert is None:
            raise ValueError("client authentication needs a CA certificate (--grpc-server-cacert)")
        root = self.cacert.read_bytes() if self.cacert is not None else None
        return grpc.ssl_server_credentials([(self.key.read_bytes(), self.cert.read_bytes())],
                                           root_certificates=root,
                                           require_client_auth=self.client_auth)


#: The largest request accepted: a device config of MAX_CONFIG_BYTES plus its P4Info.
MAX_RECEIVE_BYTES = MAX_CONFIG_BYTES + (32 << 20)
#: The largest WriteRequest applied (gRPC's default message limit, which every request had
#: before the pipeline config needed more): gRPC's limit is one per server, and a batch of
#: hundreds of MB would be parsed into millions of objects before its first update is checked.
MAX_WRITE_BYTES = 4 << 20


class P4RuntimeServer:
    """A P4Runtime gRPC server for one device.  `address` port 0 picks a free port; `tls`
    serves over TLS instead of plaintext."""

    def __init__(self, device: Any, address: str = "127.0.0.1:9559", max_workers: int = 32,
                 tls: TlsConfig | None = None) -> None:
        self.device = device
        self.address = address
        self.servicer = P4RuntimeServicer(device)
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt")
        # gRPC's default 4 MB receive limit would refuse a SetForwardingPipelineConfig of
        # netsum.p4 at K >= 1024 (6.4 MB of JSON); PI's server (simple_switch_grpc) takes 256 MB.
        # The JSON is bounded by MAX_CONFIG_BYTES again when parsed.
        self._server = grpc.server(self._executor, options=[
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)])
        self._server.add_generic_rpc_handlers((_handlers(self.servicer),))
        if hasattr(device, "set_queue_rate"):
            self._server.add_generic_rpc_handlers((queue_handler(device),))
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, tls.credentials())
        if self.port == 0:
            raise OSError(f"P4Runtime server: cannot bind {address}")
        self._stop_timers = threading.Event()
        self._timers = threading.Thread(target=self._tick, name="p4rt-timers", daemon=True)

    def _tick(self) -> None:
        while not self._stop_timers.wait(TICK_S):
            try:
                self.servicer.service.tick()
            except Exception:  # noqa: BLE001 - a bug must not stop digests and ageing for good
                log.exception("P4Runtime timers failed")

    def start(self) -> "P4RuntimeServer":
        self._server.start()
        self._timers.start()
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop serving; open streams end with UNAVAILABLE.  Idempotent."""
        self._stop_timers.set()
        if self._timers.is_alive():
            self._timers.join()
        self._server.stop(grace).wait()
        self._executor.shutdown(wait=False)
        if self.device.packet_in_handler == self.servicer.on_packet_in:
            self.device.packet_in_handler = None
        if self.device.digest_handler == self.servicer.service.digests.learn:
            self.device.digest_handler = None

    def wait(self) -> None:
        self._server.wait_for_termination()
