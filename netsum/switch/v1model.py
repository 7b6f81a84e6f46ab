"""The v1model packet life cycle, as simple_switch runs it.

parser -> verify checksums -> ingress -> end-of-ingress decision (I2E clone, resubmit,
multicast via the PRE, drop, unicast) -> egress -> E2E clone / drop -> compute checksums ->
deparser -> recirculate or transmit.  Controls run as `while node: node = node(pkt)`.
Everything here runs with the device lock held by the caller.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from netsum.switch.parser import ParserError
from netsum.switch.pipeline import Pipeline
from netsum.switch.primitives import ActionLoopLimit, AssertFailure
from netsum.switch.queues import EgressQueues
from netsum.switch.stats import Stats

__all__ = ["Packet", "V1Model", "NORMAL", "INGRESS_CLONE", "EGRESS_CLONE", "RECIRC",
           "REPLICATION", "RESUBMIT", "MAX_REINJECT", "MAX_PARSE_STATES"]

NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)
MAX_REINJECT = 16     # resubmit/recirculate rounds before a packet is dropped (loop guard)
MAX_PARSE_STATES = 1024   # parse states per packet before error ParserTimeout (loop guard)


class Packet:
    """Per-packet state: the field list, the frame bytes and the parse offset, and the requests
    actions made (clone, resubmit, recirculate, truncate, exit)."""
    __slots__ = ("F", "data", "off", "clone", "resubmit", "recirc", "truncate", "exited",
                 "digest")

    def __init__(self, F: list[int], data: bytes) -> None:
        self.F = F
        self.data = data
        self.off = 0
        self.clone: tuple[int, int | None] | None = None
        self.resubmit: int | None = None
        self.recirc: int | None = None
        self.truncate = 0
        self.exited = False
        self.digest = 0        # learn list id of the last generate_digest in ingress


class V1Model:
    def __init__(self, pl: Pipeline, stats: Stats, drop_port: int,
                 trace: Callable[[str], None] | None = None,
                 digest: Callable[[int, tuple[int, ...]], None] | None = None) -> None:
        self.pl = pl
        self.digest = digest
        self.trace = trace
        self.stats = stats
        self.drop_port = drop_port
        self.template = pl.layout.template
        s = pl.std
        self.s = s
        self.ts0 = time.monotonic_ns()
        self.too_short = pl.layout.errors.get("PacketTooShort", 1)
        self.timeout = pl.layout.errors.get("ParserTimeout", 5)
        # Hot-path copies of what _egress touches per replica.
        self.i_eport = s.egress_port
        self.i_espec = s.egress_spec
        self.i_rid = s.egress_rid
        self.i_ets = s.egress_global_timestamp if pl.uses_timestamps else None
        self.i_its = s.ingress_global_timestamp if pl.uses_timestamps else None
        self.update = pl.update_checksums
        self.deparse = pl.deparse
        self.patcher = pl.replica_patch
        self.i_iport = s.ingress_port
        self.i_plen = s.packet_length
        self.i_itype = s.instance_type
        self.i_mg = s.mcast_grp
        self.parser_start = pl.parser_start
        self.verify = pl.verify_checksums
        self.ingress_init = pl.ingress_init
        self.egress_init = pl.egress_init
        #: Egress queues, None while no port has a rate (then ingress hands packets straight
        #: to egress).  Set by the Device; `now_us` is its clock in µs since install.
        self.queues: EgressQueues | None = None
        self.now_us: Callable[[], int] = lambda: (time.monotonic_ns() - self.ts0) // 1000
        #: The native backend's runner (netsum/switch/native), used for every packet while no
        #: trace or log_msg output is wanted and no egress queue is rate-limited; both paths
        #: share registers, counters, tables and groups, so either may take any packet.
        #: Adopted from `pl.native` on the first packet after a background build finished.
        self.native: Any = None
        self.names = pl.ns.names
        self._misc = (drop_port, digest)
        self._adopt()

    def _adopt(self) -> Any:
        nat = self.native = self.pl.native
        if nat is not None:
            nat.set_misc(*self._misc)
        return nat

    # -- trace logging (-L trace): only on this path, the fast loops stay untouched ---------
    def _traced(self, stage: str, node: Any, pkt: Packet) -> None:
        assert self.trace is not None
        names = self.pl.node_names
        F = pkt.F
        valid = [h.name for h in self.pl.layout.headers.values()
                 if not h.metadata and F[h.valid]]
        self.trace(f"{stage}: valid headers {valid}")
        while node is not None:
            self.trace(f"{stage}: applying '{names.get(node, '?')}'")
            node = node(pkt)
        s = self.s
        mg = F[s.mcast_grp] if s.mcast_grp is not None else 0
        self.trace(f"{stage}: done, egress_spec={F[s.egress_spec]} mcast_grp={mg}")

    # -- helpers ---------------------------------------------------------------------------
    def _preserved(self, F: list[int], fl: int | None) -> list[tuple[int, int]]:
        if not fl:
            return []
        refs = self.pl.layout.field_lists.get(fl, [])
        out = []
        for h, f in refs:
            slot = self.pl.layout.find(h, f)
            if slot is not None:
                out.append((slot.index, F[slot.index]))
        return out

    def _parse(self, port: int, data: bytes, itype: int,
               keep: list[tuple[int, int]]) -> Packet:
        pkt = Packet(self.template[:], data)
        F = pkt.F
        F[self.i_iport] = port
        F[self.i_plen] = len(data)
        F[self.i_itype] = itype
        if self.i_its is not None:
            F[self.i_its] = (time.monotonic_ns() - self.ts0) // 1000
        for idx, val in keep:
            F[idx] = val
        state = self.parser_start
        steps = 0
        try:
            while state is not None:
                state = state(pkt)
                steps += 1
                if steps > MAX_PARSE_STATES:    # a state loop that consumes nothing
                    raise ParserError(self.timeout)
        except ParserError as e:
            self._parser_error(F, e.code)
        if self.verify is not None:
            self.verify(F, pkt)
            s = self.s
            if s.checksum_error is not None and F[s.checksum_error]:
                self.stats.checksum_errors += 1
        return pkt

    def _parser_error(self, F: list[int], code: int) -> None:
        self.stats.parser_errors += 1
        if code == self.too_short:
            self.stats.truncated += 1
        if self.s.parser_error is not None:
            F[self.s.parser_error] = code

    # -- life cycle ------------------------------------------------------------------------
    def process(self, port: int, data: bytes, out: list[tuple[int, bytes]]) -> None:
        nat = self.native
        if nat is None and self.pl.native is not None:
            nat = self._adopt()
        if nat is not None and self.trace is None and self.queues is None and \
                not self.names["LOG_ON"]:
            if nat.dirty:
                nat.flush()
            # the Python path's clock (the Device's), so timestamps agree across a switch-over
            now = self.now_us() if self.i_its is not None or self.i_ets is not None else 0
            st = nat.process(nat.ctx, port, data, now, out)
            if st:
                raise AssertFailure("native") if st == 1 else ActionLoopLimit("native")
            return
        self._ingress(port, data, NORMAL, [], out, 0)

    def _ingress(self, port: int, data: bytes, itype: int, keep: list[tuple[int, int]],
                 out: list[tuple[int, bytes]], depth: int) -> None:
        pl = self.pl
        s = self.s
        pkt = self._parse(port, data, itype, keep)
        F = pkt.F
        node = self.ingress_init
        if self.trace is None:
            while node is not None:
                node = node(pkt)
        else:
            self._traced("ingress", node, pkt)
        # End of ingress, in simple_switch's order.
        if pkt.clone is not None:
            session, fl = pkt.clone
            self._clone(session, data, port, INGRESS_CLONE, self._preserved(F, fl), out, depth)
        if pkt.digest:
            # simple_switch's learning step: the learn list's values as they are now, sent
            # whatever becomes of the packet (resubmit, drop).
            self.stats.digests += 1
            if self.digest is not None:
                self.digest(pkt.digest, tuple(F[i] for i in pl.layout.learn_lists[pkt.digest]))
        if pkt.resubmit is not None:
            if depth >= MAX_REINJECT:
                self.stats.recirc_loops += 1
                return
            self._ingress(port, data, RESUBMIT, self._preserved(F, pkt.resubmit), out,
                          depth + 1)
            return
        mg = F[self.i_mg] if self.i_mg is not None else 0
        if mg:
            replicas = pl.pre.mc_group(mg)
            if not replicas:
                self.stats.dropped += 1
            # Deparsed once; each copy re-packs only what its egress may change.
            base = None
            if self.patcher is not None and self.queues is None and len(replicas) > 1:
                st = self.patcher.static
                base = (self.deparse(F), st(F) if st is not None else None,
                        self.patcher.valid(F))
            for rep in replicas:
                copy = Packet(F[:], data)
                copy.off = pkt.off
                copy.F[s.instance_type] = REPLICATION
                if self.queues is None:
                    self._egress(copy, rep.port, rep.rid, out, depth, base)
                else:
                    self._enqueue(copy, rep.port, rep.rid, out, depth)
            return
        spec = F[s.egress_spec]
        if spec == self.drop_port:
            self.stats.dropped += 1
            return
        pkt.exited = False
        if self.queues is None:
            self._egress(pkt, spec, 0, out, depth)
        else:
            self._enqueue(pkt, spec, 0, out, depth)

    # -- egress queues (netsum/switch/queues.py) ----------------------------------------------------
    def _enqueue(self, pkt: Packet, port: int, rid: int, out: list[tuple[int, bytes]],
                 depth: int) -> None:
        q = self.queues
        assert q is not None
        if not q.limited(port):
            self._egress(pkt, port, rid, out, depth)
            return
        now = self.now_us()
        s = self.s
        found = q.push(port, now, (pkt, rid, depth))
        if found is None:
            self.stats.queue_drops += 1
            return
        F = pkt.F
        if s.enq_timestamp is not None:
            F[s.enq_timestamp] = now & 0xFFFFFFFF
        if s.enq_qdepth is not None:
            F[s.enq_qdepth] = min(found, 0x7FFFF)

    def dequeue(self, out: list[tuple[int, bytes]]) -> None:
        """Run egress for every queued packet whose departure time has come."""
        q = self.queues
        if q is None:
            return
        now = self.now_us()
        s = self.s
        for port, enq, left, (pkt, rid, depth) in q.pop_due(now):
            F = pkt.F
            if s.deq_timedelta is not None:
                F[s.deq_timedelta] = (now - enq) & 0xFFFFFFFF
            if s.deq_qdepth is not None:
                F[s.deq_qdepth] = min(left, 0x7FFFF)
            self._egress(pkt, port, rid, out, depth)

    def _clone(self, session: int, data: bytes, port: int, itype: int,
               keep: list[tuple[int, int]], out: list[tuple[int, bytes]], depth: int) -> None:
        cfg = self.pl.pre.clone_session(session)
        if cfg is None:
            return                       # unconfigured session: no copy (as bmv2)
        replicas, trunc = cfg
        for rep in replicas:
            pkt = self._parse(port, data, itype, keep)
            pkt.truncate = trunc
            if self.queues is None:
                self._egress(pkt, rep.port, rep.rid, out, depth)
            else:
                self._enqueue(pkt, rep.port, rep.rid, out, depth)

    def _egress(self, pkt: Packet, port: int, rid: int, out: list[tuple[int, bytes]],
                depth: int, base: tuple[bytes, Any, tuple[int, ...]] | None = None) -> None:
        F = pkt.F
        F[self.i_eport] = port
        F[self.i_espec] = 0
        if self.i_rid is not None:
            F[self.i_rid] = rid
        if self.i_ets is not None:
            F[self.i_ets] = (time.monotonic_ns() - self.ts0) // 1000
        pkt.clone = None
        pkt.exited = False
        node = self.egress_init
        if self.trace is None:
            while node is not None:
                node = node(pkt)
        else:
            self._traced(f"egress (port {port}, rid {rid})", node, pkt)
        if pkt.clone is not None:
            self._egress_clone(pkt, depth, out)
        if F[self.i_espec] == self.drop_port:
            self.stats.dropped += 1
            return
        if base is None or self.patcher is None:
            if self.update is not None:
                self.update(F, pkt)
            frame = self.deparse(F)
        else:
            if self.patcher.update is not None:
                self.patcher.update(F, base[1])
            elif self.update is not None:
                self.update(F, pkt)
            frame = self.patcher.patch(base[0], base[2], F)
        data = pkt.data
        if pkt.off < len(data):
            frame += data[pkt.off:]
        if pkt.truncate and len(frame) > pkt.truncate:
            frame = frame[:pkt.truncate]
        if pkt.recirc is not None:
            if depth >= MAX_REINJECT:
                self.stats.recirc_loops += 1
                return
            self._ingress(port, frame, RECIRC, self._preserved(F, pkt.recirc), out, depth + 1)
            return
        out.append((port, frame))

    def _egress_clone(self, pkt: Packet, depth: int, out: list[tuple[int, bytes]]) -> None:
        assert pkt.clone is not None
        session, _fl = pkt.clone
        cfg = self.pl.pre.clone_session(session)
        if cfg is None:
            return
        for rep in cfg[0]:
            copy = Packet(pkt.F[:], pkt.data)
            copy.off = pkt.off
            copy.truncate = cfg[1]
            copy.F[self.s.instance_type] = EGRESS_CLONE
            if depth < MAX_REINJECT:
                self._egress(copy, rep.port, rep.rid, out, depth + 1)
