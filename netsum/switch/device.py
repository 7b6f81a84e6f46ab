"""The Device: one switch instance running at most one installed pipeline.

This is the data-plane API of docs/architecture.md, used alike by the P4Runtime server, the
daemon (`netsum.switch.cli`) and tests.  `lock` (an RLock) is held for each packet and must be held by
control-plane callers around each operation, so no packet ever sees half an update.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netsum.switch.errors import ConfigError, SwitchError
from netsum.switch.pipeline import Pipeline, load_json
from netsum.switch.primitives import ActionLoopLimit, AssertFailure
from netsum.switch.queues import EgressQueues, QueueConfig
from netsum.switch.stats import Stats
from netsum.switch.v1model import V1Model

__all__ = ["Device", "Pipeline", "MAX_FRAME"]

MAX_FRAME = 65535          # largest frame accepted on a port (jumbo guard)
TRACE = 5                  # logging level of `-L trace` (below DEBUG)
_MAX_PORT = 511


class Device:
    def __init__(self, device_id: int = 0, drop_port: int = 511,
                 cpu_port: int | None = None, seed: int | None = None,
                 clock: Callable[[], int] = time.monotonic_ns) -> None:
        if not 0 <= drop_port <= _MAX_PORT:
            raise ValueError(f"drop port {drop_port} outside 0..{_MAX_PORT}")
        if cpu_port is not None and not 0 < cpu_port <= _MAX_PORT:
            raise ValueError(f"cpu port {cpu_port} outside 1..{_MAX_PORT}")
        if cpu_port is not None and cpu_port == drop_port:
            raise ValueError("cpu port and drop port must differ")
        self.device_id = device_id
        self.drop_port = drop_port
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self._stats = Stats()
        self.pipeline: Pipeline | None = None
        self.packet_in_handler: Callable[[bytes], None] | None = None
        #: digest_handler(learn_list_id, values): one call per digest generated in ingress,
        #: values in the learn list's order, made with the device lock held.
        self.digest_handler: Callable[[int, tuple[int, ...]], None] | None = None
        #: Set by the port layer: transmit(port, frame).  None = outputs are discarded.
        self.transmit: Callable[[int, bytes], None] | None = None
        self._seed = seed
        self._v1: V1Model | None = None
        self.log: logging.Logger | None = None
        #: Egress queue depth/rate per port (netsum/switch/queues.py); kept across pipelines, as
        #: simple_switch keeps its egress buffers' settings.  `clock` (ns) times the queues.
        self.queue_config = QueueConfig()
        self.clock = clock
        #: The first unexpected exception on the packet path, in one line (what it was, where
        #: it was raised, which frame), kept so that a run can fail with it: later ones are
        #: only counted in stats.internal_errors.
        self.first_error: str | None = None
        #: Counters kept elsewhere on the packet path (the C port loop, netsum/switch/native/io.py):
        #: each is called with the lock held to fold them into the statistics when read.
        self.stat_sources: list[Callable[[Stats], None]] = []
        #: Which port loop serves the packets and why (set by the port layer; GetStats).
        self.io_status = "python"
        #: the C port loop's UDP GSO/GRO counters (netsum/switch/native/io.py), once it runs
        self.udp_gso: Callable[[], dict[str, int]] | None = None

    @property
    def stats(self) -> Stats:
        """The device's statistics, including what the native backend counted so far."""
        v1 = self._v1
        if (v1 is not None and v1.native is not None) or self.stat_sources:
            with self.lock:
                if v1 is not None and v1.native is not None:
                    v1.native.take_stats(self._stats)
                for fold in self.stat_sources:
                    fold(self._stats)
        return self._stats

    def set_logger(self, log: logging.Logger | None) -> None:
        """Enable bmv2-like logging (log_msg() output, per-packet lines in the port layer)."""
        with self.lock:
            self.log = log
            if self.pipeline is not None and self._v1 is not None:
                self._bind_log(self.pipeline)
                self._v1.trace = self._trace()

    def _trace(self) -> Callable[[str], None] | None:
        log = self.log
        if log is None or not log.isEnabledFor(TRACE):
            return None
        return lambda msg: log.log(TRACE, msg)

    def _bind_log(self, pl: Pipeline) -> None:
        log = self.log
        on = log is not None and log.isEnabledFor(logging.INFO)
        pl.ns.names["LOG_ON"] = on
        if on:
            assert log is not None

            def log_msg(msg: str, args: tuple[Any, ...]) -> None:
                try:
                    text = msg.format(*args)
                except (IndexError, ValueError, KeyError):
                    text = f"{msg} {args}"
                log.info("log_msg: %s", text)
            pl.ns.names["LOG_MSG"] = log_msg

    @staticmethod
    def build_pipeline(config: bytes | str | dict[str, Any]) -> Pipeline:
        """Parse and validate a BMv2 JSON program; raises ConfigError; no side effect."""
        j = load_json(config)
        try:
            return Pipeline(j, native=None)
        except ConfigError:
            raise
        except SwitchError as e:
            raise ConfigError(e.message) from None
        except RecursionError:
            raise ConfigError("device config is nested too deeply") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            # Malformed JSON of a shape no init step anticipated: still a load-time error.
            raise ConfigError(f"malformed device config ({type(e).__name__}: {e})") from None

    def install(self, pl: Pipeline) -> None:
        """Swap in `pl` with fresh state (tables keep only const entries, registers zero)."""
        with self.lock:
            pl.reset_state()
            if self._seed is not None:
                pl.rng.seed(self._seed)
            pl.ns.names["DROP_PORT"] = self.drop_port
            old = self._v1
            if old is not None and old.native is not None:
                old.native.take_stats(self._stats)
            pl.ns.names["STATS"] = self._stats
            self._bind_log(pl)
            self.pipeline = pl
            self._v1 = V1Model(pl, self._stats, self.drop_port, self._trace(), self._on_digest)
            t0 = self.clock()
            self._v1.now_us = lambda: (self.clock() - t0) // 1000
            self._sync_queues()

    # -- egress queues (simple_switch_CLI set_queue_depth / set_queue_rate) ------------------
    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        """Queue capacity in packets of one egress port, or of all (port None); ValueError
        for a value out of range."""
        self._check_port(port)
        with self.lock:
            self.queue_config.set_depth(packets, port)

    def set_queue_rate(self, pps: int, port: int | None = None) -> None:
        """Drain rate in packets/s of one egress port, or of all; 0 = not limited."""
        self._check_port(port)
        with self.lock:
            self.queue_config.set_rate(pps, port)
            self._sync_queues()

    @staticmethod
    def _check_port(port: int | None) -> None:
        if port is not None and not 0 <= port <= _MAX_PORT:
            raise ValueError(f"port {port} outside 0..{_MAX_PORT}")

    def _sync_queues(self) -> None:
        v1 = self._v1
        if v1 is None:
            return
        if self.queue_config.any_rate:
            if v1.queues is None:
                v1.queues = EgressQueues(self.queue_config)
        elif v1.queues is not None and v1.queues.next_departure() is None:
            v1.queues = None          # back to the direct path once nothing waits

    def next_deadline(self) -> float | None:
        """Seconds from now until the next queued packet leaves, None when none waits."""
        with self.lock:
            v1 = self._v1
            q = v1.queues if v1 is not None else None
            dep = q.next_departure() if q is not None else None
            if dep is None:
                return None
            assert v1 is not None
            return max(0.0, (dep - v1.now_us()) / 1e6)

    def poll(self) -> list[tuple[int, bytes]]:
        """Run egress for the queued packets that are due; their outputs (port, frame)."""
        out: list[tuple[int, bytes]] = []
        with self.lock:
            v1 = self._v1
            if v1 is None or v1.queues is None:
                return out
            try:
                v1.dequeue(out)
            except Exception as exc:   # as in process(): a bug costs packets, not the switch
                self._internal_error(exc, "dequeuing egress")
            self._stats.tx_packets += len(out)
            self._sync_queues()
        return out

    def service_queues(self) -> None:
        """poll() and deliver the outputs as receive() does (the daemon's timer path)."""
        self._deliver(self.poll())

    def _on_digest(self, lid: int, values: tuple[int, ...]) -> None:
        h = self.digest_handler
        if h is not None:
            try:
                h(lid, values)
            except Exception as exc:   # a consumer's bug must not cost the packet
                self._internal_error(exc, f"the digest handler (learn list {lid})")

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame through the life cycle and return every output (port, frame),
        including frames for the CPU port.  Never raises on packet content."""
        out: list[tuple[int, bytes]] = []
        with self.lock:
            st = self._stats
            st.rx_packets += 1
            v1 = self._v1
            if v1 is None:
                st.no_pipeline += 1
                return out
            if not 0 <= port <= _MAX_PORT:
                st.unknown_port += 1
                return out
            if len(frame) > MAX_FRAME:
                st.oversize += 1
                return out
            try:
                v1.process(port, frame if type(frame) is bytes else bytes(frame), out)
            except AssertFailure:
                st.assert_failures += 1
                out.clear()
            except ActionLoopLimit:
                st.loop_limit += 1
                out.clear()
            except Exception as exc:   # a bug must cost one packet, not the switch
                self._internal_error(exc, f"a {len(frame)}-byte frame from port {port}")
                out.clear()
            st.tx_packets += len(out)
        return out

    def _internal_error(self, exc: Exception, what: str) -> None:
        self._stats.internal_errors += 1
        if self.first_error is None:
            where = traceback.extract_tb(exc.__traceback__)
            at = f" at {Path(where[-1].filename).name}:{where[-1].lineno}" if where else ""
            self.first_error = f"{type(exc).__name__}: {exc}{at} (processing {what})"
        if self.log is not None:
            self.log.error("internal error processing %s", what, exc_info=exc)

    def receive(self, port: int, frame: bytes) -> None:
        """Run one frame and deliver the outputs: CPU-port frames to `packet_in_handler`,
        the rest to `transmit`."""
        self._deliver(self.process(port, frame))

    def _deliver(self, outs: list[tuple[int, bytes]]) -> None:
        if not outs:
            return
        cpu = self.cpu_port
        tx = self.transmit
        for p, data in outs:
            if p == cpu:
                h = self.packet_in_handler
                if h is not None:
                    h(data)
            elif tx is not None:
                tx(p, data)
