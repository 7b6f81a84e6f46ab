"""Stateful externs: register, counter and meter arrays (their storage and control access).

The generated packet code touches the storage lists directly (`RegisterArray.values`,
`CounterArray.packets/bytes`, `MeterArray.execute`); these lists are never rebound, only mutated,
so code compiled against them stays valid for the life of the pipeline.  Control calls validate
indices and widths and raise the typed errors of `netsum.switch.errors`.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from netsum.switch.entries import CounterValue, MeterConfig
from netsum.switch.errors import FailedPrecondition, InvalidArgument, OutOfRange

if TYPE_CHECKING:
    from netsum.switch.tables import Table

__all__ = ["RegisterArray", "CounterArray", "MeterArray", "GREEN", "YELLOW", "RED",
           "execute_bucket", "new_bucket"]

GREEN, YELLOW, RED = 0, 1, 2     # v1model MeterColor encoding used by bmv2


def _check_index(kind: str, name: str, index: int, size: int) -> None:
    if not isinstance(index, int) or not 0 <= index < size:
        raise OutOfRange(f"{kind} '{name}': index {index} outside 0..{size - 1}")


class RegisterArray:
    """`values` is a list of ints, or, once `bind` fused the array with others
    (netsum/switch/lanes.py), a column view of a numpy array: generated code then reads cells
    through int()."""
    __slots__ = ("name", "id", "size", "bitwidth", "values", "_mask", "fused")

    def __init__(self, name: str, id: int, size: int, bitwidth: int) -> None:
        self.name = name
        self.id = id
        self.size = size
        self.bitwidth = bitwidth
        self._mask = (1 << bitwidth) - 1
        self.values: Any = [0] * size
        self.fused = False

    def bind(self, view: Any) -> None:
        """Keep the cells in `view` (a numpy column of a fused array) from now on."""
        if any(self.values):
            view[:] = self.values
        self.values = view
        self.fused = True

    def read(self, index: int) -> int:
        _check_index("register", self.name, index, self.size)
        return int(self.values[index])

    def read_range(self, start: int, stop: int) -> list[int]:
        """Cells start..stop-1 as Python ints (P4Runtime wildcard reads copy in ranges)."""
        cells = self.values[start:stop]
        return cells.tolist() if self.fused else list(cells)

    def write(self, index: int, value: int) -> None:
        _check_index("register", self.name, index, self.size)
        if not isinstance(value, int) or value < 0 or value > self._mask:
            raise InvalidArgument(f"register '{self.name}': value {value!r} does not fit in "
                                  f"bit<{self.bitwidth}>")
        self.values[index] = value

    def reset(self) -> None:
        if self.fused:
            self.values[:] = 0
        else:
            self.values[:] = [0] * self.size


class CounterArray:
    """Indirect counters keep cells here; direct counters keep them on table entries (this object
    then only forwards to the bound table)."""

    __slots__ = ("name", "id", "size", "is_direct", "binding", "unit", "packets", "bytes", "table")

    def __init__(self, name: str, id: int, size: int, is_direct: bool = False,
                 binding: str | None = None, unit: str = "packets_and_bytes") -> None:
        self.name = name
        self.id = id
        self.size = size
        self.is_direct = is_direct
        self.binding = binding
        self.unit = unit
        self.packets: list[int] = [0] * size
        self.bytes: list[int] = [0] * size
        self.table: Table | None = None

    def use_arrays(self) -> None:
        """Keep the cells in numpy uint64 arrays from now on (shared with the native backend;
        generated code updates them in place, `read` returns Python ints)."""
        self.packets = np.array(self.packets, dtype=np.uint64)  # type: ignore[assignment]
        self.bytes = np.array(self.bytes, dtype=np.uint64)  # type: ignore[assignment]

    def read(self, index: int) -> CounterValue:
        if self.is_direct:
            raise FailedPrecondition(f"counter '{self.name}' is direct: read it through table "
                                     f"'{self.binding}' entries")
        _check_index("counter", self.name, index, self.size)
        return CounterValue(int(self.packets[index]), int(self.bytes[index]))

    def read_range(self, start: int, stop: int) -> tuple[list[int], list[int]]:
        """(packets, bytes) of cells start..stop-1 as Python ints (indirect counters)."""
        if self.is_direct:
            raise FailedPrecondition(f"counter '{self.name}' is direct: read it through table "
                                     f"'{self.binding}' entries")
        p, b = self.packets[start:stop], self.bytes[start:stop]
        return (p.tolist() if hasattr(p, "tolist") else list(p),
                b.tolist() if hasattr(b, "tolist") else list(b))

    def write(self, index: int, value: CounterValue) -> None:
        if self.is_direct:
            raise FailedPrecondition(f"counter '{self.name}' is direct: write it through table "
                                     f"'{self.binding}' entries")
        _check_index("counter", self.name, index, self.size)
        if value.packets < 0 or value.bytes < 0:
            raise InvalidArgument(f"counter '{self.name}': negative value {value}")
        self.packets[index] = value.packets
        self.bytes[index] = value.bytes

    def reset(self) -> None:
        self.packets[:] = [0] * self.size
        self.bytes[:] = [0] * self.size   # (also right for numpy storage)


class _Bucket:
    """trTCM state of one meter cell (RFC 2698, colour-blind)."""

    __slots__ = ("cfg", "tc", "tp", "last")

    def __init__(self, cfg: MeterConfig) -> None:
        self.cfg = cfg
        self.tc = float(cfg.cburst)
        self.tp = float(cfg.pburst)
        self.last = time.monotonic()

    def color(self, amount: int, now: float) -> int:
        cfg = self.cfg
        dt = now - self.last
        self.last = now
        self.tc = min(float(cfg.cburst), self.tc + dt * cfg.cir)
        self.tp = min(float(cfg.pburst), self.tp + dt * cfg.pir)
        if self.tp < amount:
            return RED
        if self.tc < amount:
            self.tp -= amount
            return YELLOW
        self.tp -= amount
        self.tc -= amount
        return GREEN


class MeterArray:
    __slots__ = ("name", "id", "size", "is_direct", "binding", "unit", "result_target", "_cells",
                 "table")

    def __init__(self, name: str, id: int, size: int, unit: str, is_direct: bool = False,
                 binding: str | None = None) -> None:
        self.name = name
        self.id = id
        self.size = size
        self.unit = unit                 # "packets" | "bytes"
        self.is_direct = is_direct
        self.binding = binding
        self.result_target: tuple[str, str] | None = None
        self._cells: list[_Bucket | None] = [None] * size
        self.table: Table | None = None

    @staticmethod
    def check_config(name: str, cfg: MeterConfig) -> None:
        if min(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) < 0:
            raise InvalidArgument(f"meter '{name}': negative rate or burst in {cfg}")
        if cfg.cir > cfg.pir:
            raise InvalidArgument(f"meter '{name}': committed rate {cfg.cir} above peak rate "
                                  f"{cfg.pir}")

    def set_config(self, index: int, cfg: MeterConfig | None) -> None:
        _check_index("meter", self.name, index, self.size)
        if cfg is None:
            self._cells[index] = None
            return
        self.check_config(self.name, cfg)
        self._cells[index] = _Bucket(cfg)

    def get_config(self, index: int) -> MeterConfig | None:
        _check_index("meter", self.name, index, self.size)
        cell = self._cells[index]
        return None if cell is None else cell.cfg

    def reset(self) -> None:
        self._cells[:] = [None] * self.size

    def execute(self, index: int, nbytes: int) -> int:
        """Colour of one packet; an unconfigured cell (or a bad index) is GREEN, as in bmv2."""
        if not 0 <= index < self.size:
            return GREEN
        cell = self._cells[index]
        if cell is None:
            return GREEN
        return cell.color(nbytes if self.unit == "bytes" else 1, time.monotonic())


def execute_bucket(bucket: _Bucket | None, amount: int) -> int:
    """Direct meters: the bucket lives on the table entry."""
    if bucket is None:
        return GREEN
    return bucket.color(amount, time.monotonic())


def new_bucket(cfg: MeterConfig | None) -> _Bucket | None:
    return None if cfg is None else _Bucket(cfg)
