"""Parser value sets (`parse_vsets` in BMv2 JSON, P4_16 `value_set<T>(size)`).

A select transition of type `parse_vset` matches when the state's key is one of the set's
members (masked by the transition's mask, if any); the control plane replaces the members
(P4Runtime ValueSetEntry, netsum/switch/p4rt/entities.py).  Members are kept in the parser's key
form: every key part occupies whole bytes (as bmv2 pads each part), so the generated code
tests `_key in VS.members` without converting per packet.  The part widths come from the
transitions that use the set (checked equal for every use); before any use they are unknown
and a member is packed with the widths the control plane gives.
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ValueSet"]


class ValueSet:
    """One value set; `members` is read by generated parser code, replaced (never mutated
    in place) by `set_members` under the device lock."""

    __slots__ = ("name", "id", "compressed_bitwidth", "max_size", "widths", "members",
                 "_values")

    def __init__(self, name: str, ident: int, compressed_bitwidth: int, max_size: int) -> None:
        self.name = name
        self.id = ident
        self.compressed_bitwidth = compressed_bitwidth
        self.max_size = max_size
        self.widths: tuple[int, ...] | None = None     # key part widths, from the parser
        self.members: frozenset[int] = frozenset()
        self._values: tuple[tuple[int, ...], ...] = ()  # as given, for reads

    def use(self, widths: Sequence[int]) -> str | None:
        """Record the key part widths of a transition using the set; a message if they differ
        from an earlier use's or from the JSON's `compressed_bitwidth`."""
        w = tuple(widths)
        if sum(w) != self.compressed_bitwidth:
            return (f"value set '{self.name}' has compressed_bitwidth "
                    f"{self.compressed_bitwidth}, the select key {sum(w)} bits")
        if self.widths is not None and self.widths != w:
            return (f"value set '{self.name}' is used with key widths {list(w)} and "
                    f"{list(self.widths)}")
        self.widths = w
        return None

    def key_of(self, values: Sequence[int]) -> int:
        """The parser's key form of one member (one value per key part, each fitting its width)."""
        widths = self.widths if self.widths is not None else ()
        if len(values) != len(widths):
            raise ValueError(f"value set '{self.name}': {len(values)} values for a key of "
                             f"{len(widths)} parts")
        key, shift = 0, 0
        for v, w in zip(reversed(values), reversed(widths)):
            if not 0 <= v < 1 << w:
                raise ValueError(f"value set '{self.name}': value {v:#x} does not fit "
                                 f"{w} bits")
            key |= v << shift
            shift += (w + 7) // 8 * 8
        return key

    def set_members(self, members: Sequence[Sequence[int]]) -> None:
        """Replace the members (ValueError naming the set when too many or malformed; the set
        is then unchanged)."""
        if len(members) > self.max_size:
            raise OverflowError(f"value set '{self.name}' holds at most {self.max_size} "
                                f"members, got {len(members)}")
        keys = frozenset(self.key_of(m) for m in members)
        self._values = tuple(dict.fromkeys(tuple(m) for m in members))
        self.members = keys

    def values(self) -> tuple[tuple[int, ...], ...]:
        """The members as written (one value per key part), duplicates removed."""
        return self._values
