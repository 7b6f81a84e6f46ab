"""Action profiles and selectors (v1model `action_profile` / `action_selector`; BMv2 JSON
`action_profiles`, tables of type `indirect` / `indirect_ws`), as bmv2's ActionProfile runs them.

A profile holds members (an action call each) and, with a selector, groups (sets of members).
Handles are bmv2's: the lowest free number, for members and groups separately.  An indirect
table's entry points at a member or a group; a packet hitting a group takes the member at
position `hash % size` among the group's members in ascending handle order, where `hash` is
the selector's calculation (its algorithm over its input fields packed like a field list) --
bmv2's `GroupMgr::get_from_hash`.  A group without members makes the lookup run no action
(bmv2: "Lookup ... yielded empty group"); entries cannot point at an empty group (EMPTY_GRP).
Members and groups in use by table entries (or, for members, by groups) cannot be deleted.
Several tables may share a profile; each resolves the member's action by name in its own
action set (bmv2 maps next nodes per table at lookup time, as here).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netsum.switch.entries import GROUP, MEMBER, ActionCall, Ref
from netsum.switch.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted

__all__ = ["ActionProfile", "InUse"]


class InUse(FailedPrecondition):
    """A member or group still referenced (bmv2 MBR_STILL_USED / GRP_STILL_USED)."""


def _lowest_free(used: dict[int, Any]) -> int:
    h = 0
    while h in used:
        h += 1
    return h


class ActionProfile:
    def __init__(self, name: str, id: int, max_size: int,
                 hash_fn: Callable[[list[int]], int] | None, with_selector: bool) -> None:
        self.name = name
        self.id = id
        self.max_size = max_size
        self.hash_fn = hash_fn
        self.with_selector = with_selector
        self.members: dict[int, ActionCall] = {}
        #: group handle -> its member handles, ascending (bmv2's get_nth order).
        self.groups: dict[int, list[int]] = {}
        self._refs: dict[Ref, int] = {}          # table entries / groups using a handle
        #: Checks an action call against the actions of the tables using this profile
        #: (set by the loader; every table must offer the member's action).
        self.check_call: Callable[[ActionCall], None] = lambda call: None
        self.on_change: Callable[[], None] = lambda: None

    # -- members -------------------------------------------------------------------------
    def add_member(self, call: ActionCall) -> int:
        self.check_call(call)
        if len(self.members) >= self.max_size > 0:
            raise ResourceExhausted(f"action profile '{self.name}' is full "
                                    f"({self.max_size} members)")
        h = _lowest_free(self.members)
        self.members[h] = call
        self.on_change()
        return h

    def modify_member(self, handle: int, call: ActionCall) -> None:
        self._member(handle)
        self.check_call(call)
        self.members[handle] = call
        self.on_change()

    def delete_member(self, handle: int) -> None:
        self._member(handle)
        if self._refs.get(Ref(MEMBER, handle)):
            raise InUse(f"action profile '{self.name}': member {handle} is still used")
        del self.members[handle]
        self.on_change()

    def _member(self, handle: int) -> ActionCall:
        call = self.members.get(handle)
        if call is None:
            raise NotFound(f"action profile '{self.name}': no member {handle}")
        return call

    # -- groups --------------------------------------------------------------------------
    def _need_selector(self) -> None:
        if not self.with_selector:
            raise InvalidArgument(f"action profile '{self.name}' has no selector: it has no "
                                  "groups")

    def create_group(self) -> int:
        self._need_selector()
        h = _lowest_free(self.groups)
        self.groups[h] = []
        self.on_change()
        return h

    def delete_group(self, handle: int) -> None:
        members = self._group(handle)
        if self._refs.get(Ref(GROUP, handle)):
            raise InUse(f"action profile '{self.name}': group {handle} is still used")
        for m in members:
            self.unref(Ref(MEMBER, m))
        del self.groups[handle]
        self.on_change()

    def set_group_members(self, handle: int, members: list[int]) -> None:
        """Make the group hold exactly `members` (validated first: a failure changes
        nothing)."""
        old = self._group(handle)
        for m in members:
            self._member(m)
        if len(set(members)) != len(members):
            raise InvalidArgument(f"action profile '{self.name}': a member is given twice")
        for m in old:
            self.unref(Ref(MEMBER, m))
        for m in members:
            self.ref(Ref(MEMBER, m))
        self.groups[handle] = sorted(members)
        self.on_change()

    def _group(self, handle: int) -> list[int]:
        self._need_selector()
        g = self.groups.get(handle)
        if g is None:
            raise NotFound(f"action profile '{self.name}': no group {handle}")
        return g

    # -- references (table entries) --------------------------------------------------------
    def check_ref(self, ref: Ref) -> None:
        if ref.kind == MEMBER:
            self._member(ref.handle)
        elif not self._group(ref.handle):
            raise InvalidArgument(f"action profile '{self.name}': group {ref.handle} is empty "
                                  "(an entry cannot point at an empty group)")

    def ref(self, ref: Ref) -> None:
        self._refs[ref] = self._refs.get(ref, 0) + 1

    def unref(self, ref: Ref) -> None:
        n = self._refs.get(ref, 0) - 1
        if n > 0:
            self._refs[ref] = n
        else:
            self._refs.pop(ref, None)

    # -- packet path ---------------------------------------------------------------------
    def resolve(self, ref: Ref, F: list[int]) -> ActionCall | None:
        """The member's action call for a packet (None: an empty group, no action runs)."""
        if ref.kind == MEMBER:
            return self.members[ref.handle]
        members = self.groups[ref.handle]
        if not members:
            return None
        h = self.hash_fn(F) if self.hash_fn is not None else 0
        return self.members[members[h % len(members)]]

    def reset(self) -> None:
        self.members.clear()
        self.groups.clear()
        self._refs.clear()
        self.on_change()
