"""Forwarding-pipeline configs: decoding the device config and checking P4Info against it.

For bmv2 the `p4_device_config` is the BMv2 JSON itself; PI also accepts the legacy
`p4.tmp.P4DeviceConfig{reassign=1, extras=2, device_data=3}` wrapper, which p4runtime 1.4.1 no
longer ships, so `decode_device_config` reads its wire format directly (field 3, bytes).

bmv2's PI layer binds P4Info objects to JSON objects *by name* (`pi_tables_imp.cpp`), so a
P4Info that names a table, action, counter, meter or register absent from the JSON, or with
other widths, would make the switch do something else than the controller believes.
`check_p4info_matches_json` refuses such a pair with INVALID_ARGUMENT naming the object.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from p4.config.v1 import p4info_pb2

from switch.errors import Code
from switch.p4rt.errors import P4RTError
from switch.p4rt.schema import Schema

__all__ = ["PipelineConfig", "decode_device_config", "check_p4info_matches_json",
           "check_p4info_consistent"]


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """One verified config: what GetForwardingPipelineConfig returns, and the built pipeline."""
    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int | None          # None when the request had no cookie
    schema: Schema
    pipeline: Any               # switch.device pipeline object (built, maybe not installed)


def decode_device_config(data: bytes) -> dict[str, Any]:
    """The BMv2 JSON of a `p4_device_config`, plain or wrapped in the legacy P4DeviceConfig."""
    if not data:
        raise P4RTError(Code.INVALID_ARGUMENT, "p4_device_config is empty (expected BMv2 JSON)")
    text = data
    if data.lstrip()[:1] != b"{":
        wrapped = _legacy_device_data(data)
        if wrapped is None:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "p4_device_config is neither BMv2 JSON nor a P4DeviceConfig")
        text = wrapped
    try:
        doc = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise P4RTError(Code.INVALID_ARGUMENT, f"p4_device_config: invalid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise P4RTError(Code.INVALID_ARGUMENT, "p4_device_config: BMv2 JSON must be an object")
    return doc


def _legacy_device_data(data: bytes) -> bytes | None:
    """Field 3 (`device_data`) of a serialized P4DeviceConfig, or None if `data` is not one.

    Protobuf wire format: key = (field << 3) | wire_type; varint (0) and length-delimited (2)
    are the only wire types that message uses."""
    pos, found = 0, None
    try:
        while pos < len(data):
            key, pos = _varint(data, pos)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, pos = _varint(data, pos)
            elif wire == 2:
                length, pos = _varint(data, pos)
                if pos + length > len(data):
                    return None
                if field == 3:
                    found = data[pos:pos + length]
                pos += length
            else:
                return None
    except IndexError:
        return None
    return found


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


class _JsonIndex:
    """Name -> object lookups over a BMv2 JSON document (only what the check needs)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        def named(section: str) -> list[dict[str, Any]]:
            items = doc.get(section) or []
            if not isinstance(items, list):
                raise P4RTError(Code.INVALID_ARGUMENT, f"BMv2 JSON: '{section}' is not a list")
            return [i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)]

        field_widths: dict[str, dict[str, int]] = {}
        for ht in named("header_types"):
            field_widths[ht["name"]] = {
                f[0]: f[1] for f in ht.get("fields", [])
                if isinstance(f, list) and len(f) >= 2 and isinstance(f[1], int)}
        self.header_fields: dict[str, dict[str, int]] = {}
        for h in named("headers"):
            self.header_fields[h["name"]] = field_widths.get(h.get("header_type", ""), {})
        self.tables: dict[str, dict[str, Any]] = {}
        for p in named("pipelines"):
            for t in p.get("tables", []) or []:
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    self.tables[t["name"]] = t
        # Several JSON actions may share a name (p4c emits one NoAction per use); all of them
        # must agree with the P4Info.
        self.actions: dict[str, list[dict[str, Any]]] = {}
        for a in named("actions"):
            self.actions.setdefault(a["name"], []).append(a)
        self.counters = {c["name"]: c for c in named("counter_arrays")}
        self.meters = {m["name"]: m for m in named("meter_arrays")}
        self.registers = {r["name"]: r for r in named("register_arrays")}

    def key_width(self, key: dict[str, Any]) -> int | None:
        target = key.get("target")
        if not (isinstance(target, list) and len(target) == 2):
            return None
        header, fname = target
        if fname == "$valid$":
            width: int | None = 1
        else:
            width = self.header_fields.get(header, {}).get(fname)
        mask = key.get("mask")
        if isinstance(mask, str):
            # A slice `f[hi:lo]` is matched through a mask; its P4Info width is the slice's.
            try:
                width = bin(int(mask, 16)).count("1")
            except ValueError:
                return None
        return width


def _mismatch(kind: str, name: str, what: str) -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT,
                     f"P4Info {kind} '{name}' does not match the BMv2 JSON: {what}")


def check_p4info_consistent(p4info: p4info_pb2.P4Info) -> None:
    """The P4Info must hold together on its own: unique non-zero ids, references that resolve,
    positive widths.  Handlers rely on it (an action_ref to nowhere would fail at read time)."""
    seen: dict[int, str] = {}

    def preamble(kind: str, pre: p4info_pb2.Preamble) -> None:
        if pre.id == 0 or not pre.name:
            raise P4RTError(Code.INVALID_ARGUMENT, f"P4Info {kind} with id {pre.id} and name "
                            f"'{pre.name}': both must be set")
        if pre.id in seen:
            raise P4RTError(Code.INVALID_ARGUMENT, f"P4Info id {pre.id} used by both "
                            f"'{seen[pre.id]}' and {kind} '{pre.name}'")
        seen[pre.id] = pre.name

    def unique_positive(kind: str, owner: str, items: Any) -> None:
        ids = [i.id for i in items]
        if len(set(ids)) != len(ids) or any(i.bitwidth <= 0 for i in items):
            raise P4RTError(Code.INVALID_ARGUMENT, f"P4Info {owner}: {kind} ids must be unique "
                            "and widths positive")

    for a in p4info.actions:
        preamble("action", a.preamble)
        unique_positive("param", f"action '{a.preamble.name}'", a.params)
    actions = {a.preamble.id for a in p4info.actions}
    for group in (p4info.counters, p4info.direct_counters, p4info.meters, p4info.direct_meters,
                  p4info.registers):
        for r in group:
            preamble("resource", r.preamble)
    for t in p4info.tables:
        preamble("table", t.preamble)
        unique_positive("match field", f"table '{t.preamble.name}'", t.match_fields)
        for ref in t.action_refs:
            if ref.id not in actions:
                raise P4RTError(Code.INVALID_ARGUMENT, f"P4Info table '{t.preamble.name}' "
                                f"refers to action id {ref.id}, which is not in the P4Info")
        for rid in t.direct_resource_ids:
            if rid not in seen:
                raise P4RTError(Code.INVALID_ARGUMENT, f"P4Info table '{t.preamble.name}' "
                                f"refers to resource id {rid}, which is not in the P4Info")
    for h in p4info.controller_packet_metadata:
        unique_positive("metadata", f"controller header '{h.preamble.name}'", h.metadata)


def check_p4info_matches_json(p4info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
    """Raise INVALID_ARGUMENT on the first P4Info object the JSON lacks or disagrees with."""
    check_p4info_consistent(p4info)
    idx = _JsonIndex(doc)
    action_names = {a.preamble.id: a.preamble.name for a in p4info.actions}
    for t in p4info.tables:
        name = t.preamble.name
        jt = idx.tables.get(name)
        if jt is None:
            raise _mismatch("table", name, "no table of that name in the JSON")
        # The table's entries and default must be expressible in P4Info terms both ways.
        want = {action_names[r.id] for r in t.action_refs}
        got = {a for a in jt.get("actions", []) or [] if isinstance(a, str)}
        if want != got:
            raise _mismatch("table", name, f"actions {sorted(want)} in P4Info, {sorted(got)} in "
                            "the JSON")
        jkeys = {k.get("name"): k for k in jt.get("key", []) or [] if isinstance(k, dict)}
        for mf in t.match_fields:
            jk = jkeys.get(mf.name)
            if jk is None:
                raise _mismatch("table", name, f"match field '{mf.name}' is not in the JSON key")
            width = idx.key_width(jk)
            if width != mf.bitwidth:
                raise _mismatch("table", name, f"match field '{mf.name}' is {mf.bitwidth} bits in "
                                f"P4Info, {width} in the JSON")
        if len(jkeys) != len(t.match_fields):
            raise _mismatch("table", name, f"{len(t.match_fields)} match fields in P4Info, "
                            f"{len(jkeys)} in the JSON")
    for a in p4info.actions:
        name = a.preamble.name
        candidates = idx.actions.get(name)
        if not candidates:
            raise _mismatch("action", name, "no action of that name in the JSON")
        want_params = [(p.name, p.bitwidth) for p in a.params]
        for ja in candidates:
            got_params = [(r.get("name"), r.get("bitwidth"))
                          for r in ja.get("runtime_data", []) or [] if isinstance(r, dict)]
            if got_params != want_params:
                raise _mismatch("action", name, f"parameters {want_params} in P4Info, "
                                f"{got_params} in the JSON")
    for c in p4info.counters:
        _check_array("counter", c.preamble.name, c.size, idx.counters, direct=False)
    for c in p4info.direct_counters:
        _check_array("direct counter", c.preamble.name, None, idx.counters, direct=True)
    for m in p4info.meters:
        _check_array("meter", m.preamble.name, m.size, idx.meters, direct=False)
    for m in p4info.direct_meters:
        _check_array("direct meter", m.preamble.name, None, idx.meters, direct=True)
    for r in p4info.registers:
        jr = _check_array("register", r.preamble.name, r.size, idx.registers, direct=None)
        width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
        if jr.get("bitwidth") != width:
            raise _mismatch("register", r.preamble.name,
                            f"{width} bits in P4Info, {jr.get('bitwidth')} in the JSON")


def _check_array(kind: str, name: str, size: int | None, arrays: dict[str, dict[str, Any]],
                 direct: bool | None) -> dict[str, Any]:
    ja = arrays.get(name)
    if ja is None:
        raise _mismatch(kind, name, f"no {kind.split()[-1]} array of that name in the JSON")
    if direct is not None and bool(ja.get("is_direct", False)) != direct:
        raise _mismatch(kind, name, "direct in one, indirect in the other")
    if size is not None and ja.get("size") != size:
        raise _mismatch(kind, name, f"size {size} in P4Info, {ja.get('size')} in the JSON")
    return ja
