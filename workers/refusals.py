"""What a REJECT means, in words: the error a refused worker raises, and the line the other
members' deadline error gives for the job's last refusal that STATUS replies carry.

A REJECT is the refused DATA's header turned around (msg_type 4), `reason` set and the field
the reason names (`netsum.wire.REASON_FIELD`) holding what the switch has: the job's member
count, the round's recorded length / offset / dest / qexp, the program's log2 K, the job's
number of slots.  Pure functions over header fields; docs/protocol.md, "Refusals", has the table.
"""
from __future__ import annotations

from netsum.wire import DEST_ALL, EXP_BIAS, EXP_ZERO, REASON_FIELD, Reason
from netsum.workers.errors import RejectedError

__all__ = ["rejected_error", "applies", "describe_reason", "who"]


def who(rank: int | None) -> str:
    return "this worker" if rank is None else f"rank {rank}"


def _exp(biased: int | None) -> str:
    """A biased exponent as the error says it: the field value and the power of two it means
    (EXP_ZERO: no exponent, the values were zeros)."""
    if biased is None:
        return "?"
    if biased == EXP_ZERO:
        return f"{EXP_ZERO} (none: zeros)"
    return f"{biased} (2^{biased - EXP_BIAS})"


def _dest(d: int) -> str:
    return "every rank (all-reduce)" if d == DEST_ALL else f"rank {d} (reduce-scatter)"


def applies(fields: dict[str, int], *, workers: int, k: int, length: int, window: int,
            use: dict[str, int] | None) -> bool:
    """Whether a REJECT can be about this worker's DATA: the switch's value differs from what
    this worker sends (its member count, K, tensor length, slots in use), and a refusal
    against the round names a use in flight (`use`: the round, offset, dest and qexp -- what
    the use carried in `reason` -- of the slot's use in flight, or None) whose value
    differs.  A worker fails only on a REJECT that its
    own configuration confirms: a frame forged from its own port draws a REJECT too (the
    switch knows a member by port and addresses), which must not stop a correct worker."""
    try:
        reason = Reason(fields["reason"])
    except ValueError:
        return False
    if reason is Reason.WORKERS:
        return fields["workers"] != workers
    if reason is Reason.K:
        return fields["klog2"] != k.bit_length() - 1
    if reason is Reason.SLOT:
        return window > fields["slot"]
    if use is None or use["round"] != fields["round"]:
        return False
    if reason is Reason.LENGTH:
        return fields["length"] != length and use["offset"] == fields["offset"]
    if reason is Reason.OFFSET:
        return fields["offset"] != use["offset"]
    if reason is Reason.QEXP:
        return use["qexp"] != fields["exp"]
    if reason is Reason.DEST:
        out_of_range = use["dest"] != DEST_ALL and use["dest"] >= workers
        return (fields["dest"] != use["dest"] or out_of_range) and \
            use["offset"] == fields["offset"]
    return False


def rejected_error(fields: dict[str, int], *, job_id: int, rank: int | None, workers: int,
                   k: int, length: int, sent: dict[str, int]) -> RejectedError:
    """The error for a REJECT with header `fields`, received by a worker configured with
    `workers` members, K `k` and a tensor of `length` elements; `sent` holds what this worker
    put in the refused use's header (offset, dest, qexp), when it knows the use."""
    raw = fields["reason"]
    try:
        reason = Reason(raw)
    except ValueError:
        reason = Reason.NONE
    slot, round_ = fields["slot"], fields["round"]
    where = f"job {job_id} slot {slot} round {round_}"
    me = who(rank)
    if reason not in REASON_FIELD:
        return RejectedError(f"job {job_id}: the switch refused {me}'s DATA for an unknown "
                             f"reason {raw} (a newer switch program?)", raw, "", 0, None)
    field = REASON_FIELD[reason]
    theirs = fields[field]
    ours: int | None
    if reason is Reason.WORKERS:
        ours = workers
        text = (f"{me} says {workers} workers, job {job_id} has {theirs} (the switch refused "
                "its DATA: give every worker the job's member count)")
    elif reason is Reason.K:
        ours = k
        text = (f"this worker uses K={k}, the switch K={1 << theirs} (job {job_id}: build the "
                "program, or start the worker, with the same K)")
    elif reason is Reason.LENGTH:
        ours = length
        text = (f"{me}'s tensor has {length} elements, the round recorded {theirs} ({where}: "
                "every member must call with a tensor of the same length)")
    elif reason is Reason.SLOT:
        ours = slot
        # The field the reason names is the slot: it carries the job's number of slots.
        where = f"job {job_id} round {round_}"
        text = (f"{me} uses slots beyond job {job_id}'s {theirs} ({where}: is --slots the "
                "job's?)")
    elif reason is Reason.OFFSET:
        ours = sent.get("offset")
        text = (f"{me}'s chunk at offset {ours if ours is not None else '?'} met the chunk at "
                f"offset {theirs} ({where}: the members' schedules disagree - the same "
                "--slots, K and collective on every rank?)")
    elif reason is Reason.QEXP:
        ours = sent.get("qexp")
        text = (f"{me} quantized its values with exponent {_exp(ours)}, the round's other "
                f"members with {_exp(theirs)} ({where}: the ranks' exponent predictions differ "
                "- every rank must pass the same `predict`)")
    else:   # DEST
        ours = sent.get("dest")
        if ours is not None and ours != DEST_ALL and ours >= workers:
            text = (f"{me} sends chunks to rank {ours}, job {job_id} has ranks "
                    f"0..{workers - 1} ({where})")
        else:
            text = (f"{me} sends its chunk to {_dest(ours) if ours is not None else '?'}, the "
                    f"round's went to {_dest(theirs)} ({where}: every member must run the "
                    "same collective with the same shards)")
    return RejectedError(f"job {job_id}: refused by the switch ({reason.name}): {text}",
                         int(reason), field, theirs, ours)


_WHY = {
    Reason.WORKERS: "a member count that is not the job's",
    Reason.LENGTH: "a tensor length that differs from the other members'",
    Reason.K: "another K than the switch's",
    Reason.DEST: "a destination that differs from the other members'",
    Reason.SLOT: "slots beyond the job's range",
    Reason.OFFSET: "a schedule (offset) that differs from the other members'",
    Reason.QEXP: "values quantized with another exponent than the other members' (the ranks' "
                 "exponent predictions differ)",
}


def describe_reason(reason: int) -> str:
    """What a refusal reason says about the refused member (for the survivors' error)."""
    try:
        return f"{Reason(reason).name}: {_WHY[Reason(reason)]}"
    except (ValueError, KeyError):
        return f"reason {reason}"
