"""Data-plane statistics of one device: what was received, sent, dropped and why.

Counters only ever grow; the packet path bumps them under `Device.lock`, readers may read them
at any time (a slightly stale value is fine)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Stats"]


@dataclass(slots=True)
class Stats:
    rx_packets: int = 0          # frames handed to the device
    tx_packets: int = 0          # frames produced on some port (incl. the CPU port)
    dropped: int = 0             # packets dropped by the program (drop port, no replicas, ...)
    queue_drops: int = 0         # packets dropped because their egress queue was full
    parser_errors: int = 0       # packets whose parser stopped with an error (not dropped)
    truncated: int = 0           # parser errors of kind PacketTooShort (frame shorter than headers)
    checksum_errors: int = 0     # verify_checksum mismatches (packet still processed)
    no_pipeline: int = 0         # frames received before any pipeline was installed
    unknown_port: int = 0        # frames from a port number outside 0..511
    oversize: int = 0            # frames larger than the configured maximum (jumbo guard)
    register_oob: int = 0        # register reads/writes with an index past the array
    counter_oob: int = 0         # counter/meter updates with an index past the array
    assert_failures: int = 0     # assert()/assume() that failed (packet dropped)
    loop_limit: int = 0          # packets whose action loop ran past LOOP_LIMIT (dropped)
    recirc_loops: int = 0        # packets dropped for exceeding the resubmit/recirculate limit
    no_tx_port: int = 0          # outputs to a port with no interface/peer attached (daemon)
    tx_errors: int = 0           # send failures on a port (e.g. frame above the link MTU)
    udp_foreign: int = 0         # UDP-tunnel datagrams not from the port's peer (dropped)
    shm_bad_desc: int = 0        # shm ring descriptors outside the ring's buffers or empty (skipped)
    shm_bad_index: int = 0       # shm ring indices the peer made impossible (ring resynchronised)
    shm_tx_full: int = 0         # outputs dropped: the shm peer's ring was full (it reads too slowly)
    digests: int = 0             # digests generated (generate_digest, end of ingress)
    internal_errors: int = 0     # unexpected exceptions on the packet path (packet dropped)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
