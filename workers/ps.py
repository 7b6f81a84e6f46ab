"""Parameter-server all-reduce over TCP: rank 0 sums every rank's tensor and sends the sum back.

The simplest host baseline: rank 0's link carries (n-1) tensors in each direction, so it is n-1
times slower than the switch on the same links (the ring spreads that load, see netsum.workers.ring).
Same payload, exponent agreement and result as the ring and the switch; the same statistics.

Owns: rank 0 accepting the n-1 other ranks (each HELLO says which) and summing piece by piece
(a piece's sum goes back to everyone as soon as the last rank's copy arrived, so receiving
and sending overlap), and the other ranks' side (send all pieces, read all sums).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from netsum.workers import quant
from netsum.workers.errors import ProtocolStateError
from netsum.workers.hostnet import accept_peer, await_hello, connect_peer, listen
from netsum.workers.hoststream import Inbound, Link, PassCounters, message, pump
from netsum.workers.ring import HostAllreduce, HostJob, PassResult, wire_format
from netsum.workers.ringplan import Header, Kind, Piece, pieces

__all__ = ["HostServer"]

SERVER = 0      # the rank that sums


class HostServer(HostAllreduce):
    """One rank of a parameter-server all-reduce (rank 0 is the server).  A context manager."""

    ALGORITHM = "ps"

    def __init__(self, job: HostJob, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(job, clock)
        serving = job.rank == SERVER and job.workers > 1
        self._listener = listen(job.peers[SERVER], job.workers) if serving else None

    def close(self) -> None:
        super().close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _connect(self, deadline: float) -> None:
        j = self.job
        if j.rank != SERVER:
            sock = connect_peer(SERVER, j.peers[SERVER], self._hello(j.rank), deadline,
                                self.clock)
            await_hello(sock, SERVER, j.peers[SERVER], self._hello(SERVER), deadline,
                        self.clock)
            self._links = [Link(sock, SERVER, j.peers[SERVER])]
            return
        if self._listener is None:
            raise ProtocolStateError("the parameter server is closed")
        # Clients connect in any order; each is accepted as the rank its HELLO names.
        links: dict[int, Link] = {}
        try:
            while len(links) < j.workers - 1:
                missing = {r: j.peers[r] for r in range(1, j.workers) if r not in links}
                sock, rank = accept_peer(self._listener, missing, self._hello(SERVER),
                                         self._hello, deadline, self.clock)
                links[rank] = Link(sock, rank, j.peers[rank])
        except BaseException:
            for ln in links.values():
                ln.sock.close()
            raise
        self._links = [links[r] for r in sorted(links)]
        self._listener.close()
        self._listener = None

    def _pass(self, acc: np.ndarray, kind: Kind, length: int, end: float | None) -> PassResult:
        j = self.job
        res = PassResult(PassCounters())
        if j.workers == 1:
            return res
        nb = acc.shape[0]
        width, wire = wire_format(kind, j.k)
        piece_blocks = max(1, j.piece_bytes // (width * wire.itemsize))
        plan = pieces(0, nb, piece_blocks)
        call = self._calls
        unit = 1 << quant.scale_shift(j.workers)
        values = kind is Kind.VALUES

        def queue(ln: Link, step: int, p: Piece) -> None:
            ln.queue(message(kind, j.job_id, call, step, p,
                             acc[p.first_block:p.stop].astype(wire).tobytes()))
            res.messages += 1

        started = self.clock()
        if j.rank != SERVER:
            (server,) = self._links
            if kind is Kind.EXPONENTS:
                server.queue(Header(Kind.BEGIN, j.job_id, call, 0, length, 0).encode())
            for p in plan:
                queue(server, 0, p)

            def take(g: int, p: Piece, data: np.ndarray) -> None:
                acc[p.first_block:p.stop] = data
                if values:
                    res.latencies.append(self.clock() - started)

            inbound = [Inbound(server, kind, j.job_id, call, [(1, p) for p in plan], width,
                               wire, take, (lambda g: unit * j.workers) if values else None)]
        else:
            have = [0] * len(plan)
            index = {p.first_block: i for i, p in enumerate(plan)}

            def add(g: int, p: Piece, data: np.ndarray) -> None:
                rows = acc[p.first_block:p.stop]
                if values:
                    np.add(rows, data, out=rows)
                else:
                    np.maximum(rows, data, out=rows)
                i = index[p.first_block]
                have[i] += 1
                if have[i] == j.workers - 1:
                    for ln in self._links:
                        queue(ln, 1, p)
                    if values:
                        res.latencies.append(self.clock() - started)

            inbound = [Inbound(ln, kind, j.job_id, call, [(0, p) for p in plan], width, wire,
                               add, (lambda g: unit) if values else None,
                               begin=length if kind is Kind.EXPONENTS else None)
                       for ln in self._links]
        res.counters = pump(self._links, inbound, j.timeout, end,
                            f"host job {j.job_id}: the parameter-server all-reduce", self.clock)
        return res

