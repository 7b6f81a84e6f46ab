"""Action profiles over P4Runtime (§9.2.1-9.2.3): ActionProfileMember and ActionProfileGroup
writes and reads, and the indirect forms of a table entry's action (a member, a group, or a
one-shot action set), as PI's action_prof_mgr.cpp serves them on bmv2.

P4Runtime ids map to the data plane's handles (netsum.switch.profiles) as PI maps them: each
member has one target member per unit of the largest weight any group gives it (a member of
weight 3 is three target members with the same action, created when first needed and purged
when no group needs them any more), and a group is the set of those target members -- so the
selector's `hash % size` over ascending handles picks members in proportion to their weights.
A profile is programmed either with members and groups or with one-shot action sets, not both
(PI's programming modes); a one-shot entry owns a hidden group and its members, removed with
the entry.  Codes as PI: duplicate ids ALREADY_EXISTS, unknown ids NOT_FOUND (in a table entry
INVALID_ARGUMENT), an action the profile's tables lack INVALID_ARGUMENT, a member or group
still in use fails its DELETE with UNKNOWN (the target refuses it), watch ports UNIMPLEMENTED.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from netsum.switch.entries import GROUP, MEMBER, ActionCall, Ref
from netsum.switch.errors import Code, SwitchError
from netsum.switch.p4rt.context import Context, EntryKey, ReadStep
from netsum.switch.p4rt.errors import P4RTError

__all__ = ["write_member", "write_group", "read_members", "read_groups", "decode_indirect",
           "encode_indirect", "release", "profile_of_table"]

Update = p4runtime_pb2.Update
MANUAL, ONESHOT = "members and groups", "one-shot action sets"


@dataclass(slots=True)
class _Profile:
    info: p4info_pb2.ActionProfile
    dp: Any                                    # netsum.switch.profiles.ActionProfile
    #: member id -> (action call, target handles: one per unit of weight needed)
    members: dict[int, tuple[ActionCall, list[int]]] = field(default_factory=dict)
    #: group id -> ({member id: weight} in request order, max_size, target group handle)
    groups: dict[int, tuple[dict[int, int], int, int]] = field(default_factory=dict)
    #: entry -> (action set [(call, weight)], target group handle, target member handles)
    oneshot: dict[EntryKey, tuple[list[tuple[ActionCall, int]], int, list[int]]] = \
        field(default_factory=dict)
    mode: str = ""


def _same(entities: list[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
    return entities


def _invalid(message: str) -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, message)


def _state(ctx: Context, profile_id: int) -> _Profile:
    st = ctx.profiles.get(profile_id)
    if st is not None:
        return st
    info = next((p for p in ctx.schema.p4info.action_profiles if p.preamble.id == profile_id),
                None)
    if info is None:
        raise _invalid(f"Invalid action profile id {profile_id}")
    dp = getattr(ctx.pipeline, "action_profiles", {}).get(info.preamble.name)
    if dp is None:
        raise P4RTError(Code.UNKNOWN, f"action profile '{info.preamble.name}' is not in the "
                        "loaded BMv2 JSON")
    st = ctx.profiles[profile_id] = _Profile(info, dp)
    return st


def _mode(st: _Profile, mode: str) -> None:
    if st.mode and st.mode != mode:
        raise _invalid(f"action profile '{st.info.preamble.name}' is programmed with {st.mode}; "
                       f"it cannot also take {mode}")
    st.mode = mode


def _target(fn: Any, *args: Any, doing: str) -> Any:
    """A data-plane call; its refusals become PI's target errors."""
    try:
        return fn(*args)
    except SwitchError as exc:
        code = Code.UNKNOWN if exc.code == Code.FAILED_PRECONDITION else exc.code
        raise P4RTError(code, f"Error when {doing} on target: {exc.message}") from None


def _decode_call(ctx: Context, st: _Profile, action: p4runtime_pb2.Action) -> ActionCall:
    # The action must be one of every table sharing the profile (PI: "Invalid action for
    # action profile"); the tables' own checks decode the parameters.
    from netsum.switch.p4rt.tables import decode_action
    tables = [ctx.schema.table(t) for t in st.info.table_ids]
    if not tables or any(action.action_id not in t.action_ids for t in tables):
        raise _invalid(f"Invalid action for action profile '{st.info.preamble.name}'")
    ta = p4runtime_pb2.TableAction()
    ta.action.CopyFrom(action)
    return decode_action(ctx, tables[0], ta, for_default=False)


# ---------------------------------------------------------------- members

def write_member(ctx: Context, kind: int, msg: p4runtime_pb2.ActionProfileMember) -> None:
    st = _state(ctx, msg.action_profile_id)
    mid = msg.member_id
    if kind == Update.INSERT:
        _mode(st, MANUAL)
        call = _decode_call(ctx, st, msg.action)
        if mid in st.members:
            raise P4RTError(Code.ALREADY_EXISTS, f"Duplicate member id: {mid}")
        h = _target(st.dp.add_member, call, doing="creating member")
        st.members[mid] = (call, [h])
        return
    if mid not in st.members:
        raise P4RTError(Code.NOT_FOUND, f"Member id does not exist: {mid}")
    call, handles = st.members[mid]
    if kind == Update.MODIFY:
        call = _decode_call(ctx, st, msg.action)
        for h in handles:
            _target(st.dp.modify_member, h, call, doing="modifying member")
        st.members[mid] = (call, handles)
        return
    if any(mid in g[0] for g in st.groups.values()):
        raise P4RTError(Code.UNKNOWN, f"Error when deleting member on target: member {mid} is "
                        "in a group")
    _target(st.dp.delete_member, handles[0], doing="deleting member")
    for h in handles[1:]:
        st.dp.delete_member(h)
    del st.members[mid]


def read_members(ctx: Context, msg: p4runtime_pb2.ActionProfileMember) -> Iterator[ReadStep]:
    for st in _selected(ctx, msg.action_profile_id):
        out = []
        for mid, (call, _h) in sorted(st.members.items()):
            if msg.member_id and mid != msg.member_id:
                continue
            e = p4runtime_pb2.Entity()
            m = e.action_profile_member
            m.action_profile_id, m.member_id = st.info.preamble.id, mid
            _fill(ctx, m.action, call)
            out.append(e)
        yield partial(_same, out)


def _selected(ctx: Context, profile_id: int) -> list[_Profile]:
    if profile_id:
        return [_state(ctx, profile_id)]
    out = []
    for p in sorted(ctx.schema.p4info.action_profiles, key=lambda p: p.preamble.id):
        try:
            out.append(_state(ctx, p.preamble.id))
        except P4RTError:
            continue            # a profile the JSON lacks holds nothing to read
    return out


def _fill(ctx: Context, out: p4runtime_pb2.Action, call: ActionCall) -> None:
    from netsum.switch.p4rt.tables import encode_action
    out.CopyFrom(encode_action(ctx, call).action)


# ---------------------------------------------------------------- groups

def _group_handles(st: _Profile, members: dict[int, int]) -> list[int]:
    """The target members of a group of these (member id: weight), creating weight copies."""
    out = []
    for mid, weight in members.items():
        call, handles = st.members[mid]
        while len(handles) < weight:
            handles.append(_target(st.dp.add_member, call, doing="creating member"))
        out.extend(handles[:weight])
    return out


def _purge_copies(st: _Profile) -> None:
    """Drop weight copies no group needs any more (PI: purge_unused_weighted_members)."""
    need: dict[int, int] = {}
    for members, _size, _h in st.groups.values():
        for mid, w in members.items():
            need[mid] = max(need.get(mid, 1), w)
    for mid, (call, handles) in st.members.items():
        keep = need.get(mid, 1)
        for h in handles[keep:]:
            st.dp.delete_member(h)
        del handles[keep:]


def _decode_members(st: _Profile, msg: p4runtime_pb2.ActionProfileGroup) -> dict[int, int]:
    members: dict[int, int] = {}
    for m in msg.members:
        if m.member_id not in st.members:
            raise P4RTError(Code.NOT_FOUND, f"Member id does not exist: {m.member_id}")
        if m.member_id in members:
            raise _invalid(f"Duplicate member id {m.member_id} in group {msg.group_id}")
        if m.weight < 0:
            raise _invalid(f"member {m.member_id}: weight must be positive")
        if m.WhichOneof("watch_kind") is not None:
            raise P4RTError(Code.UNIMPLEMENTED, "watch ports are not supported")
        members[m.member_id] = m.weight or 1
    total = sum(members.values())
    limit = msg.max_size or st.info.max_group_size
    if limit and total > limit:
        raise P4RTError(Code.RESOURCE_EXHAUSTED, f"group {msg.group_id}: {total} member "
                        f"weights exceed its max_size {limit}")
    return members


def write_group(ctx: Context, kind: int, msg: p4runtime_pb2.ActionProfileGroup) -> None:
    st = _state(ctx, msg.action_profile_id)
    gid = msg.group_id
    if not st.info.with_selector:
        raise _invalid(f"action profile '{st.info.preamble.name}' has no selector: no groups")
    if kind == Update.INSERT:
        _mode(st, MANUAL)
        if msg.max_size < 0:
            raise _invalid("Group max_size cannot be less than 0")
        if st.info.max_group_size and msg.max_size > st.info.max_group_size:
            raise _invalid("Group max_size cannot exceed static max_group_size (from P4Info)")
        if gid in st.groups:
            raise P4RTError(Code.ALREADY_EXISTS, f"Duplicate group id: {gid}")
        members = _decode_members(st, msg)
        h = _target(st.dp.create_group, doing="creating group")
        try:
            _target(st.dp.set_group_members, h, _group_handles(st, members),
                    doing="adding members to group")
        except P4RTError:
            st.dp.delete_group(h)
            raise
        st.groups[gid] = (members, msg.max_size, h)
        return
    if gid not in st.groups:
        raise P4RTError(Code.NOT_FOUND, f"Group id does not exist: {gid}")
    old, size, h = st.groups[gid]
    if kind == Update.MODIFY:
        if msg.max_size != size:
            raise _invalid("Cannot change group max_size after group creation")
        members = _decode_members(st, msg)
        _target(st.dp.set_group_members, h, _group_handles(st, members),
                doing="modifying group")
        st.groups[gid] = (members, size, h)
        _purge_copies(st)
        return
    _target(st.dp.delete_group, h, doing="deleting group")
    del st.groups[gid]
    _purge_copies(st)


def read_groups(ctx: Context, msg: p4runtime_pb2.ActionProfileGroup) -> Iterator[ReadStep]:
    for st in _selected(ctx, msg.action_profile_id):
        out = []
        for gid, (members, size, _h) in sorted(st.groups.items()):
            if msg.group_id and gid != msg.group_id:
                continue
            e = p4runtime_pb2.Entity()
            g = e.action_profile_group
            g.action_profile_id, g.group_id, g.max_size = st.info.preamble.id, gid, size
            for mid, w in members.items():
                g.members.add(member_id=mid, weight=w)
            out.append(e)
        yield partial(_same, out)


# ---------------------------------------------------------------- table entries

def profile_of_table(ctx: Context, table_id: int) -> int:
    """The P4Info action profile id of a table (0: a direct table)."""
    return next((p.preamble.id for p in ctx.schema.p4info.action_profiles
                 if table_id in p.table_ids), 0)


def decode_indirect(ctx: Context, table: Any, ta: p4runtime_pb2.TableAction,
                    ekey: EntryKey) -> Ref:
    """The Ref a table entry of an indirect table points at (a one-shot set is built here;
    `release` undoes it when the write fails or the entry goes)."""
    pid = profile_of_table(ctx, table.id)
    st = _state(ctx, pid)
    kind = ta.WhichOneof("type")
    if kind == "action_profile_member_id":
        _mode(st, MANUAL)
        got = st.members.get(ta.action_profile_member_id)
        if got is None:
            raise _invalid(f"Member id does not exist: {ta.action_profile_member_id}")
        return Ref(MEMBER, got[1][0])
    if kind == "action_profile_group_id":
        _mode(st, MANUAL)
        grp = st.groups.get(ta.action_profile_group_id)
        if grp is None:
            raise _invalid(f"Group id does not exist: {ta.action_profile_group_id}")
        return Ref(GROUP, grp[2])
    if kind == "action_profile_action_set":
        _mode(st, ONESHOT)
        if not st.info.with_selector:
            raise _invalid(f"action profile '{st.info.preamble.name}' has no selector: "
                           "one-shot action sets need one")
        actions = []
        for a in ta.action_profile_action_set.action_profile_actions:
            if a.WhichOneof("watch_kind") is not None:
                raise P4RTError(Code.UNIMPLEMENTED, "watch ports are not supported")
            if a.weight < 0:
                raise _invalid("one-shot action weight must be positive")
            actions.append((_decode_call(ctx, st, a.action), a.weight or 1))
        if not actions:
            raise _invalid("empty one-shot action set")
        handles: list[int] = []
        try:
            for call, w in actions:
                for _ in range(w):
                    handles.append(_target(st.dp.add_member, call, doing="creating member"))
            g = _target(st.dp.create_group, doing="creating group")
            st.dp.set_group_members(g, handles)
        except P4RTError:
            for h in handles:
                st.dp.delete_member(h)
            raise
        old = st.oneshot.get(ekey)
        st.oneshot[ekey] = (actions, g, handles)
        if old is not None:
            # A MODIFY: the old set goes once the entry points at the new one (release_old).
            st.oneshot[(ekey[0], ekey[1], ~ekey[2])] = old
        return Ref(GROUP, g)
    raise _invalid(f"table '{table.name}' takes its actions from an action profile: give a "
                   "member, a group or a one-shot action set")


def release(ctx: Context, table: Any, ekey: EntryKey, which: str) -> None:
    """Drop a one-shot set: `which` = "current" (the entry was deleted, or its write failed
    and the set was new) or "old" (a MODIFY replaced it)."""
    pid = profile_of_table(ctx, table.id)
    st = ctx.profiles.get(pid)
    if st is None:
        return
    key = ekey if which == "current" else (ekey[0], ekey[1], ~ekey[2])
    got = st.oneshot.pop(key, None)
    if which == "current":
        old = st.oneshot.pop((ekey[0], ekey[1], ~ekey[2]), None)
        if old is not None:            # a failed MODIFY: the old set is the entry's again
            st.oneshot[ekey] = old
    if got is None:
        return
    _actions, g, handles = got
    st.dp.delete_group(g)
    for h in handles:
        st.dp.delete_member(h)
    if not st.oneshot and not st.members and not st.groups:
        st.mode = ""


def encode_indirect(ctx: Context, table: Any, ref: Ref, ekey: EntryKey,
                    out: p4runtime_pb2.TableAction) -> None:
    st = ctx.profiles.get(profile_of_table(ctx, table.id))
    if st is None:
        return
    shot = st.oneshot.get(ekey)
    if shot is not None:
        for call, w in shot[0]:
            a = out.action_profile_action_set.action_profile_actions.add(weight=w)
            _fill(ctx, a.action, call)
        return
    if ref.kind == MEMBER:
        out.action_profile_member_id = next(m for m, (_c, hs) in st.members.items()
                                            if hs[0] == ref.handle)
    else:
        out.action_profile_group_id = next(g for g, (_m, _s, h) in st.groups.items()
                                           if h == ref.handle)
