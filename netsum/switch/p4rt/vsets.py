"""P4Runtime ValueSetEntry (spec §9.8): Write replaces a parser value set's members, Read
returns them.

Only MODIFY is valid (a value set always exists; INSERT/DELETE are INVALID_ARGUMENT); more
members than the P4Info `size` is RESOURCE_EXHAUSTED.  Each member carries one FieldMatch per
P4Info match field, by field id; exact matches only (a ternary/lpm/range/optional member is
UNIMPLEMENTED: bmv2's value sets hold plain values, masked only by the select transition).  A
value set of the P4Info that the BMv2 JSON lacks fails its requests with UNKNOWN, as PI does
for objects the target does not know.  Read with value_set_id 0: every value set.
"""
from __future__ import annotations

from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.codec import decode_uint, encode_uint
from netsum.switch.p4rt.context import Context, ReadStep
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.schema import EXACT, ValueSetInfo
from netsum.switch.valuesets import ValueSet

__all__ = ["write_value_set", "read_value_sets"]

Update = p4runtime_pb2.Update


def _data_plane(ctx: Context, info: ValueSetInfo) -> ValueSet:
    vs = ctx.pipeline.value_sets.get(info.name)
    if vs is None:
        raise P4RTError(Code.UNKNOWN, f"Error when accessing value set '{info.name}' in "
                        "target: it is not in the loaded BMv2 JSON")
    if vs.widths is None:
        # No transition uses the set: its members are never matched; keep them in the
        # P4Info's form.
        vs.use([f.bitwidth for f in info.match])
    return vs


def _member(info: ValueSetInfo, member: p4runtime_pb2.ValueSetMember, k: int) -> tuple[int, ...]:
    what = f"value set '{info.name}' member {k}"
    by_id = {}
    for m in member.match:
        if m.field_id in by_id:
            raise P4RTError(Code.INVALID_ARGUMENT, f"{what}: field id {m.field_id} given twice")
        by_id[m.field_id] = m
    unknown = set(by_id) - {f.id for f in info.match}
    if unknown:
        raise P4RTError(Code.INVALID_ARGUMENT, f"{what}: unknown match field id {min(unknown)}")
    values = []
    for f in info.match:
        m = by_id.get(f.id)
        if m is None:
            raise P4RTError(Code.INVALID_ARGUMENT, f"{what}: match field '{f.name or f.id}' "
                                                   "is missing")
        kind = m.WhichOneof("field_match_type")
        if f.match_type != EXACT or kind != "exact":
            raise P4RTError(Code.UNIMPLEMENTED, f"{what}: only exact matches are supported "
                                                f"in value sets (got {kind})")
        values.append(decode_uint(m.exact.value, f.bitwidth, f"{what} field '{f.name}'"))
    return tuple(values)


def write_value_set(ctx: Context, kind: int, vse: p4runtime_pb2.ValueSetEntry) -> None:
    info = ctx.schema.value_set(vse.value_set_id)
    if kind != Update.MODIFY:
        raise P4RTError(Code.INVALID_ARGUMENT, f"value set '{info.name}': only MODIFY is "
                                               f"allowed (got {Update.Type.Name(kind)})")
    members = [_member(info, m, k) for k, m in enumerate(vse.members)]
    if len(members) > info.size:
        raise P4RTError(Code.RESOURCE_EXHAUSTED, f"value set '{info.name}' holds at most "
                                                 f"{info.size} members, got {len(members)}")
    vs = _data_plane(ctx, info)
    try:
        vs.set_members(members)
    except (ValueError, OverflowError) as exc:
        code = Code.RESOURCE_EXHAUSTED if isinstance(exc, OverflowError) else Code.UNKNOWN
        raise P4RTError(code, str(exc)) from None


def read_value_sets(ctx: Context, vse: p4runtime_pb2.ValueSetEntry) -> Iterator[ReadStep]:
    infos = [ctx.schema.value_set(vse.value_set_id)] if vse.value_set_id else \
        sorted(ctx.schema.value_sets.values(), key=lambda v: v.id)
    for info in infos:
        values = _data_plane(ctx, info).values()       # copied under the lock: a tuple

        def step(info: ValueSetInfo = info, values: tuple[tuple[int, ...], ...] = values
                 ) -> list[p4runtime_pb2.Entity]:
            e = p4runtime_pb2.Entity()
            out = e.value_set_entry
            out.value_set_id = info.id
            for member in values:
                m = out.members.add()
                for f, v in zip(info.match, member):
                    m.match.add(field_id=f.id).exact.value = encode_uint(v)
            return [e]
        yield step
