"""Forwarding-pipeline configs: decoding the device config and checking P4Info against it.

For bmv2 the `p4_device_config` is the BMv2 JSON itself; PI also accepts the legacy
`p4.tmp.P4DeviceConfig{reassign=1, extras=2, device_data=3}` wrapper, which p4runtime 1.4.1 no
longer ships, so `decode_device_config` reads its wire format directly (field 3, bytes).

PI does not compare the P4Info with the JSON when a config is set: bmv2 loads the JSON, PI
keeps the P4Info, and objects are bound by name when a request uses them
(`netsum.switch.p4rt.binding`).  What is checked here is only that the P4Info holds together on its
own (unique ids, resolvable references), which every handler relies on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from p4.config.v1 import p4info_pb2

from netsum.switch.jsonload import strict_loads
from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.binding import TableBinding
from netsum.switch.p4rt.schema import Schema

__all__ = ["PipelineConfig", "decode_device_config", "check_p4info_consistent"]


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """One verified config: what GetForwardingPipelineConfig returns, and the built pipeline."""
    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int | None          # None when the request had no cookie
    schema: Schema
    pipeline: Any               # netsum.switch.device pipeline object (built, maybe not installed)
    bindings: dict[int, TableBinding]   # P4Info table id -> its data-plane table


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
        doc = strict_loads(text)
    except ValueError as exc:
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

    def unique_positive(kind: str, owner: str, items: Any, unique: bool = True) -> None:
        ids = [i.id for i in items]
        if (unique and len(set(ids)) != len(ids)) or any(i.bitwidth <= 0 for i in items):
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
        # PI accepts repeated match-field ids (its key builder takes the fields in order);
        # so does netsum.switch.p4rt.tables.decode_key.
        unique_positive("match field", f"table '{t.preamble.name}'", t.match_fields,
                        unique=False)
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
