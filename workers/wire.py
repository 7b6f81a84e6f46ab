"""The netsum header codec, and the Ethernet/IPv4/UDP frames the unprivileged transport sends.

Owns every encoding and decoding of the netsum v2 header, all built on one struct,
`HEADER_STRUCT`, derived from `netsum.wire.HEADER_FIELDS` (the protocol's one definition):
  * `pack` / `unpack` (`unpack_fields`): raw field values <-> the 24 header bytes;
  * `Header`, `encode`, `decode_header`, `decode`: a validated packet (header + K big-endian
    int32 values, or the header alone) <-> bytes;
  * `field_reader`, `field_writer`, `field_offset`: single struct calls over some fields of
    a packet in place, for the workers' zero-copy hot paths;
  * `header_dtype`, `packet_dtype`, `encode_batch`, `decode_batch`: the same words as numpy
    fields, for batches of packets in one contiguous buffer.
Tests of the P4 program (tests/p4helpers.py), the test oracles and the benchmarks use these
too; nothing else in the project writes the header's layout down.  Decoding validates
everything and raises `WireError` with the reason; it never returns a half-parsed packet.

A packet is the header and K values, or the header alone: a REJECT, and a RESULT with the ACK
flag (a reduce-scatter chunk this receiver does not own) carry no values (`header_only`).
"""
from __future__ import annotations

import functools
import ipaddress
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netsum import wire as protocol
from netsum.wire import (DEST_ALL, HEADER_BYTES, HEADER_FIELDS, K_SUPPORTED, UDP_PORT, Flags,
                        MsgType, round_set)
from netsum.workers.errors import WireError

__all__ = [
    "HEADER_STRUCT", "FIELD_NAMES", "OFFSETS", "pack", "unpack", "unpack_fields",
    "header_dtype", "packet_dtype", "Header", "Packet", "check_k",
    "field_reader", "field_writer", "field_offset",
    "encode", "decode", "decode_header", "encode_batch",
    "batch_bytes", "decode_batch", "Endpoint", "FramePrefix", "build_frame", "parse_frame",
    "ParsedFrame", "ipv4_checksum", "netsum_payload", "header_only", "check_peers",
    "ETH_BYTES", "IPV4_BYTES", "UDP_BYTES", "ETHERTYPE_IPV4", "IPPROTO_UDP",
]

ETH_BYTES = 14
IPV4_BYTES = 20
UDP_BYTES = 8
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
_IPV4_TTL = 64
_IPV4_DF = 0x4000
_KNOWN_FLAGS = int(Flags.RETX | Flags.NONFINITE | Flags.ACK)
_MSG_TYPES = frozenset(int(m) for m in MsgType)
_REJECT = int(MsgType.REJECT)
_RESULT = int(MsgType.RESULT)
_ACK = int(Flags.ACK)


def header_only(msg_type: int, flags: int) -> bool:
    """Whether a packet of this type and flags is the header alone (no values): a REJECT, and
    an ACK (a RESULT whose values went to another rank)."""
    return msg_type == _REJECT or (msg_type == _RESULT and bool(flags & _ACK))


def _header_struct() -> struct.Struct:
    codes = {8: "B", 16: "H", 32: "I"}
    for field in HEADER_FIELDS:
        if field.bits not in codes:
            raise AssertionError(f"header field {field.name} is {field.bits} bits; the codec "
                                 "packs whole 8/16/32-bit words only")
    return struct.Struct(">" + "".join(codes[f.bits] for f in HEADER_FIELDS))


#: The header, the one definition every encoder and decoder below is built on: HEADER_FIELDS
#: in wire order, each a big-endian unsigned word of its width (">BBHHBBIIBBBBI" for v2).
HEADER_STRUCT = _header_struct()
#: Field names in wire order: the order of `unpack`'s tuple.
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in HEADER_FIELDS)
_DEFAULTS = tuple(f.default for f in HEADER_FIELDS)
_INDEX = {name: i for i, name in enumerate(FIELD_NAMES)}
_CODE = dict(zip(FIELD_NAMES, HEADER_STRUCT.format.lstrip(">")))
#: Byte offset of each field in the header.
OFFSETS: dict[str, int] = {
    name: struct.calcsize(">" + HEADER_STRUCT.format.lstrip(">")[:i])
    for i, name in enumerate(FIELD_NAMES)}
_NUMPY_CODE = {"B": "u1", "H": ">u2", "I": ">u4"}
assert HEADER_STRUCT.size == HEADER_BYTES


def _make_pack() -> Callable[..., bytes]:
    # A straight-line function with one keyword parameter per field (its default the field's)
    # and one struct call: what a generic loop over the fields costs 3-5x more per packet.
    # Only the protocol's field names (identifiers) and integers are spliced into the source.
    params = ", ".join(f"{n}={d}" for n, d in zip(FIELD_NAMES, _DEFAULTS))
    src = (f"def pack(*, {params}):\n"
           f"    try:\n        return PACK({', '.join(FIELD_NAMES)})\n"
           f"    except ERROR as exc:\n        raise WIRE_ERROR(f'header fields: {{exc}}') from None\n")
    ns: dict[str, Any] = {"PACK": HEADER_STRUCT.pack, "ERROR": struct.error,
                          "WIRE_ERROR": WireError}
    exec(compile(src, "<netsum header pack>", "exec"), ns)
    fn: Callable[..., bytes] = ns["pack"]
    fn.__doc__ = """The header's bytes from field values by keyword; a missing field takes its
    default (0; dest DEST_ALL); a value that does not fit its field raises WireError, an
    unknown keyword TypeError.  No other check: a caller that wants a valid packet builds a
    `Header` and calls `encode`."""
    return fn


#: `pack(**fields)`: the header's bytes (see `_make_pack`).
pack = _make_pack()


#: `unpack(buf, offset=0)`: the raw field values, in FIELD_NAMES order, of the header at
#: buf[offset:] (no validation; `decode_header` validates).
unpack: Callable[..., tuple[int, ...]] = HEADER_STRUCT.unpack_from


def unpack_fields(buf: bytes | bytearray | memoryview, offset: int = 0) -> dict[str, int]:
    """`unpack` by name."""
    return dict(zip(FIELD_NAMES, HEADER_STRUCT.unpack_from(buf, offset)))


def check_k(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k not in K_SUPPORTED:
        raise WireError(f"K must be one of {K_SUPPORTED} (the P4 program's build), got {k!r}")
    return k


@functools.cache
def header_dtype() -> np.dtype:
    """numpy structured dtype of the header alone: HEADER_STRUCT's words, by field name."""
    return np.dtype([(name, _NUMPY_CODE[_CODE[name]]) for name in FIELD_NAMES])


@functools.cache
def packet_dtype(k: int) -> np.dtype:
    """numpy structured dtype of one packet: the header's fields, then K big-endian int32."""
    check_k(k)
    dt = np.dtype([(name, _NUMPY_CODE[_CODE[name]]) for name in FIELD_NAMES]
                  + [("values", ">i4", (k,))])
    assert dt.itemsize == protocol.packet_bytes(k) - (ETH_BYTES + IPV4_BYTES + UDP_BYTES)
    return dt


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """One netsum header; fields by name only (their order is HEADER_FIELDS', which changed
    with the v2 layout: positional construction would silently shift them).  The v2 fields
    default to what a packet that is not DATA carries (a DATA packet must set workers,
    klog2 and length: the switch refuses 0)."""
    msg_type: MsgType
    flags: Flags
    job_id: int
    slot: int
    exp: int
    count: int
    round: int
    offset: int
    workers: int = 0
    dest: int = DEST_ALL
    reason: int = 0
    klog2: int = 0
    length: int = 0

    @property
    def set(self) -> int:
        """The shadow set this packet's round uses."""
        return round_set(self.round)

    @property
    def header_only(self) -> bool:
        """A packet with this header carries no values (REJECT, ACK)."""
        return header_only(self.msg_type, self.flags)

    def __post_init__(self) -> None:
        for field in HEADER_FIELDS:
            value = getattr(self, field.name)
            try:
                number = operator.index(value)
            except TypeError:
                number = -1
            if isinstance(value, bool) or not 0 <= number < (1 << field.bits):
                raise WireError(f"header field {field.name}={value!r} does not fit in "
                                f"{field.bits} bits")


@dataclass(frozen=True, slots=True)
class Packet:
    header: Header
    values: np.ndarray  # int32, native byte order, length K (0 for a header-only packet)


def encode(header: Header, values: np.ndarray | None, k: int) -> bytes:
    """One packet.  `values` None means K zeros (bootstrap/proposal-only packets); a
    header-only packet (REJECT, ACK) is the header alone and takes no values."""
    if not isinstance(header, Header):
        raise WireError(f"expected a wire.Header, got {type(header).__name__}")
    head = HEADER_STRUCT.pack(*(int(getattr(header, name)) for name in FIELD_NAMES))
    if header.header_only:
        if values is not None:
            raise WireError(f"a {header.msg_type.name} with flags {header.flags!r} is the "
                            "header alone: it carries no values")
        return head
    if values is None:
        return head + bytes(4 * check_k(k))
    check_k(k)
    return head + _check_values(values, k, 1).astype(">i4").tobytes()


def _check_values(values: np.ndarray, k: int, rows: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise WireError(f"packet values must be integers (int32), got dtype {arr.dtype}")
    arr = arr.reshape(rows, k) if arr.size == rows * k else arr
    if arr.shape != (rows, k) and not (rows == 1 and arr.shape == (k,)):
        raise WireError(f"expected {rows}x{k} values, got shape {np.shape(values)}")
    if arr.dtype.itemsize > 4 or arr.dtype.kind == "u":
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise WireError("packet values do not fit in int32")
    return arr


def _span(names: Sequence[str]) -> tuple[int, struct.Struct, list[int]]:
    """The struct covering header fields `names`: HEADER_STRUCT's words from the first one's
    offset to the last one's end, fields in between skipped as pad bytes; and where each
    name's value sits in that struct's tuple."""
    missing = [n for n in names if n not in _INDEX]
    if missing or len(set(names)) != len(names) or not names:
        raise WireError(f"fields {missing or list(names)}: need distinct header fields")
    chosen = sorted(names, key=OFFSETS.__getitem__)
    fmt, at = ">", OFFSETS[chosen[0]]
    for name in chosen:
        fmt += "x" * (OFFSETS[name] - at) + _CODE[name]
        at = OFFSETS[name] + struct.calcsize(">" + _CODE[name])
    return OFFSETS[chosen[0]], struct.Struct(fmt), [chosen.index(n) for n in names]


def field_offset(name: str) -> int:
    """Byte offset of a header field (e.g. flags)."""
    if name not in OFFSETS:
        raise WireError(f"unknown header field {name!r}")
    return OFFSETS[name]


@functools.cache
def field_reader(names: tuple[str, ...]) -> Callable[[Any], tuple[int, ...]]:
    """`read(buf)` -> the values of header fields `names`, in that order, from a packet that
    starts at buf[0]: one struct call, for the receive hot path (no validation)."""
    start, layout, where = _span(names)
    if where == sorted(where) and start == 0:
        return layout.unpack_from
    unpack_span = layout.unpack_from
    pick = operator.itemgetter(*where)
    if len(names) == 1:
        return lambda buf: (pick(unpack_span(buf, start)),)
    return lambda buf: pick(unpack_span(buf, start))


@functools.cache
def field_writer(names: tuple[str, ...]) -> tuple[int, struct.Struct]:
    """(offset of the first field, struct): `struct.pack_into(buf, at + offset, *values)`
    writes the adjacent header fields `names` (in wire order) of a packet starting at buf[at]:
    one struct call per packet for the send hot path (no range checks)."""
    start, layout, where = _span(names)
    if where != list(range(len(names))) or "x" in layout.format:
        raise WireError(f"field_writer needs adjacent fields in wire order, got {list(names)}")
    return start, layout


def _check_buffer(buf: object) -> None:
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise WireError(f"expected bytes, got {type(buf).__name__}")


def decode_header(buf: bytes | bytearray | memoryview, k: int) -> Header:
    """Validate length (header and K values, or the header alone for REJECT and ACK),
    message type and flags; return the header."""
    _check_buffer(buf)
    size = HEADER_BYTES + 4 * check_k(k)
    if len(buf) not in (size, HEADER_BYTES):
        what = "truncated" if len(buf) < size else "too long"
        raise WireError(f"netsum packet {what}: {len(buf)} bytes, expected {size} "
                        f"(header {HEADER_BYTES} + {k} x int32) or {HEADER_BYTES} (REJECT, ACK)")
    values: dict[str, Any] = unpack_fields(buf)   # ints; msg_type and flags become enums
    if values["msg_type"] not in _MSG_TYPES:
        raise WireError(f"unknown netsum msg_type {values['msg_type']}")
    if values["flags"] & ~_KNOWN_FLAGS:
        raise WireError(f"unknown netsum flag bits 0x{values['flags'] & ~_KNOWN_FLAGS:02x}")
    bare = header_only(values["msg_type"], values["flags"])
    if bare != (len(buf) == HEADER_BYTES):
        kind = MsgType(values["msg_type"]).name + (" with ACK" if values["flags"] & _ACK else "")
        raise WireError(f"netsum {kind} of {len(buf)} bytes: " + (
            f"it is the header alone ({HEADER_BYTES} bytes)" if bare else
            f"it carries {k} values ({size} bytes)"))
    values["msg_type"] = MsgType(values["msg_type"])
    values["flags"] = Flags(values["flags"])
    return Header(**values)


def decode(buf: bytes | bytearray | memoryview, k: int) -> Packet:
    header = decode_header(buf, k)
    if header.header_only:
        return Packet(header, np.zeros(0, dtype=np.int32))
    values = np.frombuffer(buf, dtype=">i4", count=k, offset=HEADER_BYTES).astype(np.int32)
    return Packet(header, values)


def encode_batch(fields: Mapping[str, int | np.ndarray], values: np.ndarray | None,
                 k: int, count: int | None = None, fill: bool = True) -> np.ndarray:
    """Many packets at once, as a structured array of `packet_dtype(k)` (one contiguous buffer,
    `.tobytes()` or `batch_bytes` to split).  `fields` maps header field names to scalars or
    per-packet arrays; missing fields take their default (0; dest DEST_ALL).  `values` is
    (n, K) integers, or None for zeros - or, with fill=False, left unwritten for a caller that
    fills `rec["values"]` itself (the quantizer's `out=`), saving a pass over the batch."""
    n = count if count is not None else (len(values) if values is not None else None)
    if n is None:
        for v in fields.values():
            if np.ndim(v):
                n = len(v)  # type: ignore[arg-type]
                break
    if n is None:
        raise WireError("encode_batch: cannot tell how many packets (give values or count)")
    known = {f.name: f for f in HEADER_FIELDS}
    for name in fields:
        if name not in known:
            raise WireError(f"encode_batch: unknown header field {name!r}; fields are "
                            f"{list(known)}")
    if values is not None:
        values = _check_values(values, k, n)
    # Headers are assembled in a dense array first, then copied into the packets in one
    # strided pass: writing each header field straight into the 140-byte records would touch
    # every cache line of the batch once per field.
    head = np.empty(n, dtype=header_dtype())
    for field in HEADER_FIELDS:
        col = np.asarray(fields.get(field.name, field.default))
        if col.dtype.kind not in "iub":
            raise WireError(f"header field {field.name} must be integers, got {col.dtype}")
        if col.ndim and col.shape != (n,):
            raise WireError(f"header field {field.name}: {col.shape[0]} values for {n} packets")
        if col.size and (col.min() < 0 or col.max() >= (1 << field.bits)):
            raise WireError(f"header field {field.name} does not fit in {field.bits} bits")
        head[field.name] = col
    rec = np.empty(n, dtype=packet_dtype(k))
    raw = rec.view(np.uint8).reshape(n, rec.dtype.itemsize)
    raw[:, :HEADER_BYTES] = head.view(np.uint8).reshape(n, HEADER_BYTES)
    if values is not None:
        rec["values"] = values
    elif fill:
        rec["values"] = 0
    return rec


def batch_bytes(rec: np.ndarray) -> list[bytes]:
    """Split an encoded batch into one bytes object per packet."""
    raw = rec.tobytes()
    size = rec.dtype.itemsize
    return [raw[i:i + size] for i in range(0, len(raw), size)]


def decode_batch(bufs: Sequence[bytes], k: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Decode many packets at once: per-field arrays and an (n, K) int32 array.  Every packet is
    validated (length, msg_type, flags); the first bad one raises WireError naming its index."""
    dt = packet_dtype(k)
    if isinstance(bufs, (bytes, bytearray, memoryview)) or not len(bufs):
        raise WireError("decode_batch needs a non-empty sequence of packets (bytes each)")
    for i, b in enumerate(bufs):
        _check_buffer(b)
        if len(b) != dt.itemsize:
            raise WireError(f"packet {i}: {len(b)} bytes, expected {dt.itemsize}")
    rec = np.frombuffer(b"".join(bufs), dtype=dt)
    out = {name: rec[name].astype(np.int64) for name in FIELD_NAMES}
    bare = (out["msg_type"] == _REJECT) | ((out["msg_type"] == _RESULT) & (out["flags"] & _ACK != 0))
    bad = ~np.isin(out["msg_type"], sorted(_MSG_TYPES)) | ((out["flags"] & ~_KNOWN_FLAGS) != 0) \
        | bare
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise WireError(f"packet {i}: unknown msg_type {out['msg_type'][i]} or flags "
                        f"0x{out['flags'][i]:02x}, or a header-only kind with values")
    return out, rec["values"].astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Ethernet / IPv4 / UDP frames


def _mac(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        if len(value) != 6:
            raise WireError(f"MAC address must be 6 bytes, got {len(value)}")
        return value
    parts = value.split(":")
    try:
        raw = bytes(int(p, 16) for p in parts)
    except ValueError:
        raw = b""
    if len(parts) != 6 or len(raw) != 6 or any(len(p) not in (1, 2) for p in parts):
        raise WireError(f"bad MAC address {value!r} (expected aa:bb:cc:dd:ee:ff)")
    return raw


def _ip(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        if len(value) != 4:
            raise WireError(f"IPv4 address must be 4 bytes, got {len(value)}")
        return value
    try:
        return ipaddress.IPv4Address(value).packed
    except ValueError as exc:
        raise WireError(f"bad IPv4 address {value!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of a netsum flow as it appears in frames: MAC, IPv4 address and UDP port."""
    mac: bytes
    ip: bytes
    port: int = UDP_PORT

    @classmethod
    def parse(cls, mac: str | bytes, ip: str | bytes, port: int = UDP_PORT) -> Endpoint:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise WireError(f"bad UDP port {port!r}")
        return cls(_mac(mac), _ip(ip), port)

    def __str__(self) -> str:
        return (f"{':'.join(f'{b:02x}' for b in self.mac)}/"
                f"{ipaddress.IPv4Address(self.ip)}:{self.port}")


def ipv4_checksum(header: bytes) -> int:
    """RFC 791 header checksum: ones' complement of the ones' complement sum of 16-bit words."""
    if len(header) % 2:
        raise WireError("IPv4 header length must be even")
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


@dataclass(frozen=True, slots=True)
class FramePrefix:
    """The 42 bytes of Ethernet/IPv4/UDP headers for payloads of one fixed length between two
    endpoints.  All netsum packets of a job have the same length, so the prefix (checksum
    included) is computed once and each frame is `prefix + payload` (no per-packet work)."""
    src: Endpoint
    dst: Endpoint
    payload_len: int
    data: bytes

    @classmethod
    def build(cls, src: Endpoint, dst: Endpoint, payload_len: int) -> FramePrefix:
        eth = dst.mac + src.mac + struct.pack("!H", ETHERTYPE_IPV4)
        total = IPV4_BYTES + UDP_BYTES + payload_len
        if total > 0xFFFF:
            raise WireError(f"payload of {payload_len} bytes does not fit in one IPv4 packet")
        # Identification 0 with DF set: these datagrams are never fragmented (RFC 6864).
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, _IPV4_DF, _IPV4_TTL, IPPROTO_UDP,
                         0, src.ip, dst.ip)
        ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
        # UDP checksum 0 = "not computed" (allowed for IPv4, RFC 768).
        udp = struct.pack("!HHHH", src.port, dst.port, UDP_BYTES + payload_len, 0)
        return cls(src, dst, payload_len, eth + ip + udp)

    def frame(self, payload: bytes) -> bytes:
        if len(payload) != self.payload_len:
            raise WireError(f"payload is {len(payload)} bytes, prefix built for "
                            f"{self.payload_len}")
        return self.data + payload


def build_frame(src: Endpoint, dst: Endpoint, payload: bytes) -> bytes:
    return FramePrefix.build(src, dst, len(payload)).frame(payload)


@dataclass(frozen=True, slots=True)
class ParsedFrame:
    src: Endpoint
    dst: Endpoint
    payload: bytes
    packet: Packet


def _udp_checksum(src_ip: bytes, dst_ip: bytes, udp: bytes) -> int:
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, IPPROTO_UDP, len(udp))
    data = pseudo + udp + (b"\0" if len(udp) % 2 else b"")
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF or 0xFFFF


# From the ethertype to the end of the UDP header of an option-less IPv4 frame.
_FAST = struct.Struct("!HBBHHHBBH4s4sHHHH")


def netsum_payload(frame: bytes, k: int, local: Endpoint | None = None,
                   service: Endpoint | None = None) -> bytes | None:
    """The receive fast path: the netsum payload of `frame` when it is the common case (a
    header and K values, IPv4 without options, not fragmented, UDP checksum 0 as the switch
    sends results, valid header and, if given, from `service` to `local`: MACs, IPv4
    addresses and UDP ports), else None.  Whenever it returns a payload, `parse_frame(frame,
    k)` accepts the frame with that same payload and `check_peers` accepts it; None only means
    "take the full path" (which then accepts or explains the rejection)."""
    size = HEADER_BYTES + 4 * k
    head = ETH_BYTES + IPV4_BYTES + UDP_BYTES
    if type(frame) is not bytes or len(frame) != head + size:
        return None
    (ethertype, vihl, _tos, total, _ident, frag, _ttl, proto, _csum, src, dst, sport, dport,
     ulen, ucsum) = _FAST.unpack_from(frame, 12)
    if ethertype != ETHERTYPE_IPV4 or vihl != 0x45 or total != IPV4_BYTES + UDP_BYTES + size \
            or frag & 0x3FFF or proto != IPPROTO_UDP or ulen != UDP_BYTES + size or ucsum \
            or (sport != UDP_PORT and dport != UDP_PORT):
        return None
    if local is not None and (dst != local.ip or dport != local.port or
                              frame[0:6] != local.mac):
        return None
    if service is not None and (src != service.ip or sport != service.port or
                                frame[6:12] != service.mac):
        return None
    kind, flags = frame[head + field_offset("msg_type")], frame[head + field_offset("flags")]
    if kind not in _MSG_TYPES or flags & ~_KNOWN_FLAGS or header_only(kind, flags):
        return None
    if ipv4_checksum(frame[ETH_BYTES:ETH_BYTES + IPV4_BYTES]) != 0:
        return None
    return frame[head:]


def parse_frame(frame: bytes | bytearray | memoryview, k: int) -> ParsedFrame:
    """Validate and take apart one Ethernet frame carrying a netsum packet.  Ethernet padding
    after the IPv4 datagram is allowed; everything else inconsistent raises WireError."""
    _check_buffer(frame)
    frame = bytes(frame)
    if len(frame) < ETH_BYTES + IPV4_BYTES + UDP_BYTES:
        raise WireError(f"frame truncated: {len(frame)} bytes is shorter than "
                        f"Ethernet+IPv4+UDP headers ({ETH_BYTES + IPV4_BYTES + UDP_BYTES})")
    (ethertype,) = struct.unpack_from("!H", frame, 12)
    if ethertype != ETHERTYPE_IPV4:
        raise WireError(f"not IPv4: ethertype 0x{ethertype:04x}")
    vihl, _, total, _, frag, _, proto, _ = struct.unpack_from("!BBHHHBBH", frame, ETH_BYTES)
    if vihl >> 4 != 4:
        raise WireError(f"IPv4 version field is {vihl >> 4}")
    ihl = (vihl & 0xF) * 4
    if ihl < IPV4_BYTES:
        raise WireError(f"IPv4 IHL {ihl // 4} is below 5")
    if total < ihl + UDP_BYTES:
        raise WireError(f"IPv4 total length {total} too small for its header and UDP")
    if ETH_BYTES + total > len(frame):
        raise WireError(f"frame truncated: IPv4 total length {total} but only "
                        f"{len(frame) - ETH_BYTES} bytes after Ethernet")
    ip_header = frame[ETH_BYTES:ETH_BYTES + ihl]
    if ipv4_checksum(ip_header) != 0:
        raise WireError("IPv4 header checksum mismatch")
    if frag & 0x3FFF:
        raise WireError("IPv4 fragment (netsum packets are never fragmented)")
    if proto != IPPROTO_UDP:
        raise WireError(f"IPv4 protocol {proto} is not UDP")
    udp_at = ETH_BYTES + ihl
    sport, dport, ulen, csum = struct.unpack_from("!HHHH", frame, udp_at)
    if ulen != total - ihl:
        raise WireError(f"UDP length {ulen} disagrees with IPv4 payload length {total - ihl}")
    if UDP_PORT not in (sport, dport):
        raise WireError(f"UDP ports {sport}->{dport}: neither is the netsum port {UDP_PORT}")
    src_ip, dst_ip = ip_header[12:16], ip_header[16:20]
    udp = frame[udp_at:udp_at + ulen]
    if csum and _udp_checksum(src_ip, dst_ip, udp[:6] + b"\0\0" + udp[8:]) != csum:
        raise WireError("UDP checksum mismatch")
    payload = udp[UDP_BYTES:]
    packet = decode(payload, k)
    return ParsedFrame(Endpoint(frame[6:12], src_ip, sport), Endpoint(frame[0:6], dst_ip, dport),
                       payload, packet)


def check_peers(parsed: ParsedFrame, local: Endpoint, service: Endpoint) -> None:
    """A frame a worker takes must come from the switch it registered with and be addressed
    to this worker: source = the service's MAC, IPv4 address and UDP_PORT, destination = the
    worker's own MAC, address and port.  Raises WireError naming the first difference."""
    for side, got, want in (("source", parsed.src, service), ("destination", parsed.dst, local)):
        for what, a, b in (("MAC", got.mac, want.mac), ("IPv4", got.ip, want.ip),
                           ("UDP port", got.port, want.port)):
            if a != b:
                raise WireError(f"frame {side} {got} is not {want} ({what} differs)")
