"""Multicast replicas deparsed once: each copy patches only the headers its egress may change.

A multicast group turns one packet into N copies that differ only in what egress (and the
checksum update after it) writes.  When the program lets us bound that at load time, the
packet is deparsed once after ingress (`base`), and each replica's frame is that base with the
headers holding a field egress may write re-packed in place (`patch`).  That is the same bytes
as a full deparse of the replica when:

- egress can only take headers out (`setInvalid`, BMv2's remove_header: a reduce-scatter
  ACK drops its values), never add, copy or stack them, so every replica's headers are the
  base's minus some; the copies also start from the same field values.  A replica with the
  base's validity is patched in place; one that lost headers is the base's remaining slices;
- every field egress may write is known: destinations of the primitives of every action its
  tables can run (assign, register_read, random, hash, meters, the P4_14 arithmetic), plus the
  checksum targets; a header containing any of them is re-packed whole, all others are bytes
  of the base that nothing changed;
- egress does not truncate, clone, recirculate or exit (those change what leaves, or whether).

Anything else (or a primitive not listed) returns None: the replicas deparse in full.

The checksum update is incremental the same way when every `update_checksum` is csum16 over
plain fields: the input number n (the fields' bits concatenated, as netsum/switch/calculations.py
builds it) splits into the fields egress may write and the rest, n = static + dyn with
disjoint bits, so n mod 0xffff = (static mod 0xffff + dyn) mod 0xffff and n == 0 exactly when
both parts are 0.  `static` is computed once per multicast packet, each replica adds its own
few fields: the same checksum as the full computation, bit for bit, without any alignment
condition on the fields.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from netsum.switch.expressions import ExprCompiler, unwrap
from netsum.switch.layout import HeaderInfo, Layout
from netsum.switch.parser import pack_parts
from netsum.switch.program import Action, Checksum, Control, Deparser

__all__ = ["ReplicaPatcher", "replica_patcher"]

#: primitives whose parameter 0 is the (only) field they write
_WRITES_PARAM0 = {"assign", "modify_field", "register_read", "modify_field_rng_uniform",
                  "modify_field_with_hash_based_offset", "add", "subtract", "add_to_field",
                  "subtract_from_field", "bit_and", "bit_or", "bit_xor", "shift_left",
                  "shift_right"}
#: primitives that write no header field (metadata writes of the life cycle are irrelevant)
_NO_HEADER_WRITE = {"register_write", "count", "mark_to_drop", "drop", "no_op", "log_msg",
                    "assert", "assume", "_jump", "_jump_if_zero"}


class ReplicaPatcher:
    """`patch(base, F)`: the frame of a replica whose fields are F, given the base frame.
    `static(F)` / `update(F, st)` (None when not incremental): the checksum parts computed once
    per packet, and the per-replica update that replaces the pipeline's full one."""

    MAX_PATTERNS = 256

    def __init__(self, headers: list[HeaderInfo], dirty: set[str],
                 static: Callable[[list[Any]], Any] | None = None,
                 update: Callable[[list[Any], Any], None] | None = None) -> None:
        self.headers = headers                 # deparser order, metadata excluded
        self.dirty = dirty                     # names of the headers to re-pack
        self.static = static
        self.update = update
        self.cache: dict[tuple[tuple[int, ...], tuple[int, ...]],
                         Callable[[bytes, list[Any]], bytes]] = {}

    def valid(self, F: list[Any]) -> tuple[int, ...]:
        """Which deparsed headers are valid in F (the base's, kept with its frame)."""
        return tuple(1 if F[h.valid] else 0 for h in self.headers)

    def patch(self, base: bytes, base_valid: tuple[int, ...], F: list[Any]) -> bytes:
        key = (base_valid, self.valid(F))
        fn = self.cache.get(key)
        if fn is None:
            fn = self._build(*key)
        return fn(base, F)

    def _build(self, was: tuple[int, ...],
               now: tuple[int, ...]) -> Callable[[bytes, list[Any]], bytes]:
        ns: dict[str, Any] = {}
        if any(n and not w for w, n in zip(was, now)):
            raise AssertionError("egress validated a header: replica_patcher admits removal only")
        if was == now:              # the common case: same layout, re-pack in place
            lines = ["def patch(base, F):", "    b = bytearray(base)"]
        else:                       # headers removed: the base's remaining slices, re-packed
            lines = ["def patch(base, F):", "    b = bytearray()"]
        off = 0                     # offset in the base
        for i, (h, w, n) in enumerate(zip(self.headers, was, now)):
            if not w:
                continue
            codes, args = pack_parts(h) if h.name in self.dirty else ("", [])
            if codes:
                ns[f"S{i}"] = struct.Struct(">" + codes)
            if was == now:
                if codes:
                    lines.append(f"    S{i}.pack_into(b, {off}, {', '.join(args)})")
            elif n:
                if codes:
                    lines.append(f"    b += S{i}.pack({', '.join(args)})")
                else:
                    lines.append(f"    b += base[{off}:{off + h.nbytes}]")
            off += h.nbytes
        lines.append("    return bytes(b)")
        exec(compile("\n".join(lines) + "\n", "<netsum replica patch>", "exec"), ns)
        fn: Callable[[bytes, list[Any]], bytes] = ns["patch"]
        if len(self.cache) < self.MAX_PATTERNS:
            self.cache[(was, now)] = fn
        return fn


def _egress_writes(layout: Layout, checksums: tuple[Checksum, ...], actions: tuple[Action, ...],
                   egress: Control) -> tuple[set[str], set[int]] | None:
    """(headers holding a field that egress or a checksum update may write, the slots of those
    fields); None when that cannot be bounded."""
    if egress.action_profiles:
        return None
    names: set[str] = set()
    for t in egress.tables:
        if t.direct_meters:
            return None                # a meter writes its result field from the table
        names.update(a for a in t.action_names if isinstance(a, str))
    dirty: set[str] = set()
    slots: set[int] = set()
    for a in actions:
        if a.name not in names:
            continue
        for p in a.primitives:
            op = p.get("op") if isinstance(p, dict) else None
            if op in _NO_HEADER_WRITE:
                continue
            if op == "remove_header":
                d = unwrap((p.get("parameters") or [None])[0])
                if not (isinstance(d, dict) and d.get("type") == "header" and
                        d.get("value") in layout.headers):
                    return None        # a stack element or a union member
                continue               # a removed header is left out, never re-packed
            if op not in _WRITES_PARAM0:
                return None            # validity changes, clones, truncation, exit, unknown
            d = unwrap((p.get("parameters") or [None])[0])
            if not (isinstance(d, dict) and d.get("type") == "field"):
                return None
            hname = d.get("value", [None])[0]
            h = layout.headers.get(hname) if isinstance(hname, str) else None
            if h is None:
                return None
            slots.add(layout.slot(d["value"], "").index)
            if not h.metadata:
                dirty.add(h.name)
    for c in checksums:
        tgt = c.target_ref
        h = layout.headers.get(tgt[0]) if isinstance(tgt, list) and tgt else None
        if h is None:
            return None
        slots.add(c.target.index)
        if not h.metadata:
            dirty.add(h.name)
    return dirty, slots


def _checksum_source(j: dict[str, Any], layout: Layout, checksums: tuple[Checksum, ...],
                     written: set[int]) -> str | None:
    """Source of STATIC(F) and UPDATE(F, st) for the csum16 update checksums, or None."""
    calcs = {c.get("name"): c for c in j.get("calculations") or [] if isinstance(c, dict)}
    static, update = [], []
    for c in checksums:
        if not c.update:
            continue
        calc = calcs.get(c.calculation)
        if calc is None or calc.get("algo") != "csum16":
            return None
        parts: list[tuple[str, int, bool]] = []
        for el in calc.get("input") or []:
            if not (isinstance(el, dict) and el.get("type") == "field"):
                return None
            s = layout.slot(el["value"], "")
            parts.append((f"F[{s.index}]", s.width, s.index in written))
        total = sum(w for _, w, _d in parts)
        pad = (-total) % 8
        shift = pad + (8 if ((total + pad) // 8) % 2 else 0)   # odd byte count: a zero byte
        terms: dict[bool, list[str]] = {False: [], True: []}
        for src, w, is_dyn in reversed(parts):
            terms[is_dyn].append(f"(({src} & {(1 << w) - 1}) << {shift})")
            shift += w
        tgt = c.target
        cond = "True" if c.if_cond is None else \
            ExprCompiler(layout, f"{c.path}.if_cond").cond(c.if_cond)
        st = " | ".join(terms[False]) or "0"
        dyn = " | ".join(terms[True]) or "0"
        static.append(f"    _s = {st}\n    out.append((_s % 65535, _s != 0))\n")
        k = len(static) - 1
        update.append(f"    if {cond}:\n        _d = {dyn}\n"
                      f"        _t = (st[{k}][0] + _d) % 65535\n"
                      f"        if _t == 0 and (st[{k}][1] or _d):\n            _t = 65535\n"
                      f"        F[{tgt.index}] = ~_t & 65535 & {tgt.mask}\n")
    return ("def STATIC(F):\n    out = []\n" + "".join(static) + "    return out\n"
            "def UPDATE(F, st):\n" + "".join(update) + "    return None\n")


def replica_patcher(j: dict[str, Any], layout: Layout, checksums: tuple[Checksum, ...],
                    actions: tuple[Action, ...], deparser: Deparser, egress: Control,
                    per_copy: set[int]) -> ReplicaPatcher | None:
    """`per_copy`: slots the life cycle sets per copy (egress_port, egress_rid, ...)."""
    stacked = {h for s in layout.stacks.values() for h in s.headers} | \
        {h for u in layout.unions.values() for h in u}
    headers = list(deparser.headers)
    w = _egress_writes(layout, checksums, actions, egress)
    # varbit headers: a copy's header offsets would depend on its run-time widths
    if w is None or any(h.name in stacked or h.varbit >= 0 for h in headers):
        return None
    dirty, written = w
    written |= per_copy
    src = _checksum_source(j, layout, checksums, written)
    ns: dict[str, Any] = {}
    if src is not None:
        exec(compile(src, "<netsum replica checksums>", "exec"), ns)
    return ReplicaPatcher(headers, dirty & {h.name for h in headers},
                          ns.get("STATIC"), ns.get("UPDATE"))
