"""The commands of an STF file, as data (parsed by `netsum.tools.stf.syntax`)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "StfError", "Number", "KeyMatch", "ActionCall", "Add", "SetDefault", "RemoveAll", "Packet",
    "Expect", "NoPacket", "Wait", "CheckCounter", "MirroringAdd", "MirroringAddMc",
    "MirroringDelete", "McGroupCreate", "McNodeCreate", "McNodeUpdate", "McNodeAssociate",
    "CounterWrite", "RegisterWrite", "RegisterReset", "MeterSetRates", "ReadOnly", "Command",
]


class StfError(ValueError):
    """A syntax error, with the file position."""

    def __init__(self, where: str, line: int, message: str) -> None:
        super().__init__(f"{where}:{line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class Number:
    """A number as written: `text` keeps the radix and the `*` digits a ternary key needs."""
    text: str

    @property
    def radix_bits(self) -> int:
        """Bits per digit (4 hex, 1 binary); 0 for decimal (no digit-wise mask)."""
        t = self.text.lower()
        return 4 if t.startswith("0x") else 1 if t.startswith("0b") else 0

    @property
    def digits(self) -> str:
        return self.text[2:] if self.radix_bits else self.text

    @property
    def has_wildcards(self) -> bool:
        return "*" in self.text

    def value(self) -> int:
        """The value with `*` digits read as 0."""
        if self.radix_bits == 4:
            return int(self.digits.replace("*", "0"), 16)
        if self.radix_bits == 1:
            return int(self.digits.replace("*", "0"), 2)
        return int(self.text)

    def digit_mask(self) -> int | None:
        """The mask of the written digits (1 for a digit, 0 for `*`), None for decimal.  Only
        the digits written count: `0x**01` on a 32-bit field masks 0x000000ff."""
        bits = self.radix_bits
        if not bits:
            return None
        mask = 0
        for ch in self.digits:
            mask = (mask << bits) | (0 if ch == "*" else (1 << bits) - 1)
        return mask

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class KeyMatch:
    """`name:value` or `name:value/prefix_len` in an `add`."""
    name: str
    value: Number
    prefix_len: int | None = None


@dataclass(frozen=True, slots=True)
class ActionCall:
    name: str
    args: tuple[tuple[str, Number], ...]


@dataclass(frozen=True, slots=True)
class Add:
    line: int
    table: str
    priority: int | None
    keys: tuple[KeyMatch, ...]
    action: ActionCall
    entry_id: str | None


@dataclass(frozen=True, slots=True)
class SetDefault:
    line: int
    table: str
    action: ActionCall


@dataclass(frozen=True, slots=True)
class RemoveAll:
    line: int


@dataclass(frozen=True, slots=True)
class Packet:
    line: int
    port: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Expect:
    """One expected frame on `port`.  `pattern` holds upper-case hex nibbles and `*`; None when
    the line gives no data (any frame on that port).  `exact_length`: the line ended in `$`."""
    line: int
    port: int
    pattern: str | None
    exact_length: bool = False


@dataclass(frozen=True, slots=True)
class NoPacket:
    line: int


@dataclass(frozen=True, slots=True)
class Wait:
    line: int


@dataclass(frozen=True, slots=True)
class CheckCounter:
    """`index` is a number, or `$ID` naming an entry added with `= ID` (a direct counter)."""
    line: int
    counter: str
    index: str
    kind: str | None              # "packets" / "bytes"; None: the plain form (packets == 0)
    op: str
    value: int


@dataclass(frozen=True, slots=True)
class MirroringAdd:
    line: int
    session: int
    port: int


@dataclass(frozen=True, slots=True)
class MirroringAddMc:
    line: int
    session: int
    group: int


@dataclass(frozen=True, slots=True)
class MirroringDelete:
    line: int
    session: int


@dataclass(frozen=True, slots=True)
class McGroupCreate:
    line: int
    group: int


@dataclass(frozen=True, slots=True)
class McNodeCreate:
    line: int
    rid: int
    ports: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class McNodeUpdate:
    line: int
    handle: int
    ports: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class McNodeAssociate:
    line: int
    group: int
    handle: int


@dataclass(frozen=True, slots=True)
class CounterWrite:
    line: int
    counter: str
    index: int
    packets: int
    bytes: int


@dataclass(frozen=True, slots=True)
class RegisterWrite:
    line: int
    register: str
    index: int
    value: int


@dataclass(frozen=True, slots=True)
class RegisterReset:
    line: int
    register: str


@dataclass(frozen=True, slots=True)
class MeterSetRates:
    """`index` None: every cell (`meter_array_set_rates`).  Rates are BMv2's: units per
    microsecond, with a burst size in units, committed rate first."""
    line: int
    meter: str
    index: int | None
    rates: tuple[tuple[float, int], ...]


@dataclass(frozen=True, slots=True)
class ReadOnly:
    """`counter_read`, `register_read`, `meter_get_rates`, `mirroring_get`: they only print in
    p4c's driver (nothing is checked), so they change nothing here either."""
    line: int
    verb: str


Command = (Add | SetDefault | RemoveAll | Packet | Expect | NoPacket | Wait | CheckCounter
           | MirroringAdd | MirroringAddMc | MirroringDelete | McGroupCreate | McNodeCreate
           | McNodeUpdate | McNodeAssociate | CounterWrite | RegisterWrite | RegisterReset
           | MeterSetRates | ReadOnly)
