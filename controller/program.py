"""What the controller knows about the netsum P4 program's control-plane API (p4/README.md).

The one place that spells the program's table, action, parameter and counter names, and the
conventions the controller layers on top (multicast group and replication-id numbering,
drop-simulator thresholds).  Everything else asks `entry()` to build entries by *name*, so a
reordered parameter list in the P4 source cannot silently swap values, and a renamed table fails
with the schema's "Did you mean" error instead of a wrong write.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Mapping

from netsum.controller.errors import JobError
from netsum.match import Exact
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.errors import LiteralError
from netsum.p4rt.schema import Schema

__all__ = [
    "DMAC", "ARP", "SERVICE_SRC", "JOB", "MEMBER", "EPOCH", "REPLICA", "RESULT_PORT", "DROP_SIM_IN",
    "DROP_SIM_OUT", "DROP_ACTIONS", "FLOOD_MGID", "JOB_COUNTERS", "REFUSALS", "PORT_COUNTERS",
    "entry", "next_epoch", "job_mgid", "replica_rid", "drop_threshold", "max_jobs", "slot_pool",
    "built_k",
]

DMAC = "NetsumIngress.dmac"                  # ethernet.dstAddr → forward(port) | broadcast(mgid)
ARP = "NetsumIngress.arp_responder"          # arp.tpa → arp_reply(mac)
SERVICE_SRC = "NetsumIngress.service_src"    # ipv4.srcAddr → own_service | parent_service(port)
JOB = "NetsumIngress.job"                    # job_id → job_root(...) | job_leaf(...)
MEMBER = "NetsumIngress.member"              # (job_id, ingress_port, ipv4.srcAddr, ethernet.srcAddr)
                                             #   → set_member(worker_bit, rank)
EPOCH = "NetsumIngress.job_epoch"            # job_id → set_epoch(epoch); default set_epoch(0)
REPLICA = "NetsumEgress.replica"             # (egress_rid, egress_port) → set_replica(...)
RESULT_PORT = "NetsumEgress.result_port"     # (job_id, egress_port) → allow_result; default refuse
DROP_SIM_IN = "NetsumIngress.drop_sim_in"    # ingress_port → set_drop_in(threshold)
DROP_SIM_OUT = "NetsumEgress.drop_sim_out"   # egress_port → set_drop_out(threshold)
#: Drop-simulator table → (action with a threshold, action that passes everything).
DROP_ACTIONS = {DROP_SIM_IN: ("set_drop_in", "no_drop_in"),
                DROP_SIM_OUT: ("set_drop_out", "no_drop_out")}

#: The dmac table's default action floods with group 1 (`broadcast(1)` in the program).
FLOOD_MGID = 1

#: Per-job counters (indexed by job id), column name → counter name, in display order.
JOB_COUNTERS: tuple[tuple[str, str], ...] = (
    ("data_in", "NetsumIngress.pkts_in"),
    ("retx", "NetsumIngress.retransmissions"),
    ("results_out", "NetsumEgress.results_out"),
    ("partials_up", "NetsumEgress.partials_up"),
    ("status_out", "NetsumEgress.status_out"),
    ("drop_non_member", "NetsumIngress.drop_non_member"),
    ("drop_bad_slot", "NetsumIngress.drop_bad_slot"),
    ("drop_unknown_job", "NetsumIngress.drop_unknown_job"),
    ("drop_bad_type", "NetsumIngress.drop_bad_type"),
    ("drop_malformed", "NetsumIngress.drop_malformed"),
    ("drop_stale", "NetsumIngress.drop_stale"),
    ("drop_result_port", "NetsumEgress.drop_result_port"),
    # protocol v2: a member's DATA refused with a REJECT, by reason (REJECT(SLOT) counts in
    # drop_bad_slot)
    ("reject_workers", "NetsumIngress.reject_workers"),
    ("reject_length", "NetsumIngress.reject_length"),
    ("reject_k", "NetsumIngress.reject_k"),
    ("reject_dest", "NetsumIngress.reject_dest"),
    ("reject_offset", "NetsumIngress.reject_offset"),
    ("reject_qexp", "NetsumIngress.reject_qexp"),
)
#: The refusal counters among JOB_COUNTERS, by column name.  None of them counts anything in
#: a run of members only over links that keep each sender's packets in order: after a run,
#: a nonzero one names what went wrong (docs/protocol.md, "What the switch guarantees").
REFUSALS: tuple[str, ...] = tuple(c for c, _ in JOB_COUNTERS
                                  if c.startswith(("drop_", "reject_")))
#: Per-port counters of the drop simulator, and (protocol v2) of what the switch drops as
#: claiming to come from the aggregation service without coming through it.
PORT_COUNTERS: tuple[tuple[str, str], ...] = (
    ("sim_drops_in", "NetsumIngress.sim_drops_in"),
    ("sim_drops_out", "NetsumEgress.sim_drops_out"),
    ("drop_spoofed_src", "NetsumIngress.drop_spoofed_src"),
    ("drop_irregular", "NetsumIngress.drop_irregular"),
    ("drop_unaggregated", "NetsumIngress.drop_unaggregated"),
)

#: Job multicast groups sit above this base so they never meet the flood group (1) or the
#: small ids people pick by hand with mc_mgrp_create.
_JOB_MGID_BASE = 0x1000


def entry(schema: Schema, table: str, match: Mapping[str, int], action: str,
          params: Mapping[str, int] | None = None) -> TableEntry:
    """An exact-match entry with parameters given by name (order taken from the P4Info)."""
    t = schema.table(table)
    keys = []
    for f in t.match_fields:
        short = f.name.rsplit(".", 1)[-1]
        if short not in match and f.name not in match:
            raise LiteralError(f"internal: no value for key field {f.name!r} of {t.alias!r}")
        keys.append((f.name, Exact(match.get(short, match.get(f.name, 0)))))
    a = schema.table_action(t, action)
    given = dict(params or {})
    missing = [p.name for p in a.params if p.name not in given]
    extra = sorted(set(given) - {p.name for p in a.params})
    if missing or extra:
        raise LiteralError(f"action {a.alias!r} of the running program takes parameters "
                           f"({', '.join(p.name for p in a.params)}); the controller has "
                           f"({', '.join(given)}): is the pipeline the netsum program?")
    return TableEntry(t.name, tuple(keys), a.name, tuple(given[p.name] for p in a.params))


def job_mgid(job_id: int) -> int:
    return _JOB_MGID_BASE + job_id


def replica_rid(job_id: int, index: int) -> int:
    """The replication id of a job's index-th copy.  (egress_rid, egress_port) keys the replica
    table, so a rid names (job, destination); job ids start at 1, so rid 0 stays the flood's."""
    if not 0 <= index < 64:
        raise JobError(f"job {job_id}: more than 64 destinations on one switch")
    return (job_id << 6) | index


def drop_threshold(probability: float) -> int:
    """set_drop_in/out(threshold) drops when a 16-bit random value is below `threshold`, i.e.
    with probability threshold/65536; 1.0 is approximated by 65535/65536."""
    if not 0.0 <= probability <= 1.0:
        raise LiteralError(f"drop probability {probability} is not within 0..1")
    return min(0xFFFF, round(probability * 0x10000))


def next_epoch(current: int) -> int:
    """The epoch after `current` (16 bits, never back to 0, the table's default): a (slot, set)
    tagged with another epoch counts as empty, so a new run of a job id never meets the rounds
    an earlier run left in its slots."""
    return current % 0xFFFF + 1


def max_jobs(schema: Schema) -> int:
    """Job ids index the per-job counters; ids at or above their size would share cell 0."""
    return schema.counter(JOB_COUNTERS[0][1]).size


def slot_pool(schema: Schema, default: int) -> int:
    """The slot pool size of the running build: the value registers hold two sets per slot.
    Registers are only *declared* in P4Info (no access needed), so this works on any target."""
    for r in schema.p4info.registers:
        if r.preamble.name.endswith(".bitmap"):
            return r.size // 2
    return default


def built_k(register_names: Iterable[str]) -> int | None:
    """The K a netsum.p4 pipeline was built for, from its P4Info's register names (one value
    register `val<i>` per lane of the packet); None for a program without them."""
    lanes = [n for n in register_names if re.fullmatch(r"(?:.*\.)?val\d+", n)]
    return len(lanes) or None
