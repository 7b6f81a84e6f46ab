"""Running one STF test on netsum-switch: load the program over P4Runtime, play the commands in
file order, compare the frames that came out with the `expect` lines.

Every command takes effect before the next one starts: a frame is finished (see
`target.NetsumSwitch.settle`) before the next write or frame, so a test means one thing.  As in
p4c's driver, `expect` lines are collected and compared at the end, per port.
"""
from __future__ import annotations

import enum
import operator
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netsum.p4rt.cells import DirectCounterCell, counter_wildcard
from netsum.p4rt.entities import DELETE, INSERT, MODIFY, TableEntry, table_wildcard, update
from netsum.p4rt.errors import ClientError, LiteralError, SchemaLookupError
from netsum.p4rt.schema import Schema
from netsum.schema import parse_p4info
from netsum.tools.stf import names, writes
from netsum.tools.stf.expect import Mismatch, compare_ports
from netsum.tools.stf.syntax import (Add, CheckCounter, Command, CounterWrite, Expect,
                                     McGroupCreate, McNodeAssociate, McNodeCreate, McNodeUpdate,
                                     MeterSetRates, MirroringAdd, MirroringAddMc, MirroringDelete,
                                     NoPacket, Packet, ReadOnly, RegisterReset, RegisterWrite,
                                     RemoveAll, SetDefault, StfError, Wait, parse_stf_file)
from netsum.tools.stf.target import NetsumSwitch, TargetError, refusal

__all__ = ["Verdict", "Outcome", "run_test", "run_commands"]


class Verdict(enum.Enum):
    PASS = "pass"
    WRONG = "wrong packet"              # output differs from the expectations
    REFUSED = "refused"                 # the switch refused the program or a write
    NOT_COMPILED = "not compiled"
    UNSUPPORTED = "stf unsupported"     # the test uses something the runner cannot express
    ERROR = "error"                     # the switch died or hung; a runner fault


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str = ""
    details: tuple[str, ...] = ()
    seconds: float = 0.0
    frames_in: int = 0
    frames_out: int = 0
    received: dict[int, list[str]] = field(default_factory=dict)   # port -> hex frames

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "reason": self.reason,
                "details": list(self.details), "seconds": round(self.seconds, 3),
                "frames_in": self.frames_in, "frames_out": self.frames_out}


class _Stop(Exception):
    def __init__(self, verdict: Verdict, reason: str) -> None:
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason


_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


class _Player:
    """Plays commands on a started switch; keeps what the checks at the end need."""

    def __init__(self, sw: NetsumSwitch, schema: Schema) -> None:
        self.sw = sw
        self.schema = schema
        self.pre = writes.Replication()
        self.expects: list[Expect] = []
        self.entries: dict[str, TableEntry] = {}   # `= ID` of an add -> its entry
        self.counter_problems: list[Mismatch] = []
        self.frames_in = 0

    def write(self, cmd: Command, updates: Sequence[Any]) -> None:
        try:
            self.sw.write(updates)
        except ClientError as exc:
            raise _Stop(Verdict.REFUSED, f"line {cmd.line}: {type(cmd).__name__.lower()} "
                                         f"refused: {refusal(exc)}") from None

    def play(self, cmd: Command) -> None:
        s = self.schema
        if isinstance(cmd, Packet):
            self.sw.send(cmd.port, cmd.data)
            self.frames_in += 1
            self.sw.settle()
        elif isinstance(cmd, Expect):
            self.expects.append(cmd)
        elif isinstance(cmd, Add):
            te = writes.table_entry(s, cmd)
            self.write(cmd, [update(INSERT, te, s)])
            if cmd.entry_id is not None:
                self.entries[cmd.entry_id] = te
        elif isinstance(cmd, SetDefault):
            self.write(cmd, [update(MODIFY, writes.default_entry(s, cmd), s)])
        elif isinstance(cmd, RemoveAll):
            self._remove_all(cmd)
        elif isinstance(cmd, Wait):
            self.sw.settle()
        elif isinstance(cmd, McGroupCreate):
            self.write(cmd, self.pre.create_group(cmd.group))
        elif isinstance(cmd, McNodeCreate):
            self.write(cmd, self.pre.create_node(cmd.rid, cmd.ports))
        elif isinstance(cmd, McNodeUpdate):
            self.write(cmd, self.pre.update_node(cmd.handle, cmd.ports))
        elif isinstance(cmd, McNodeAssociate):
            self.write(cmd, self.pre.associate(cmd.group, cmd.handle))
        elif isinstance(cmd, MirroringAdd):
            self.write(cmd, self.pre.mirror(cmd.session, "port", cmd.port))
        elif isinstance(cmd, MirroringAddMc):
            self.write(cmd, self.pre.mirror(cmd.session, "mc", cmd.group))
        elif isinstance(cmd, MirroringDelete):
            self.write(cmd, self.pre.unmirror(cmd.session))
        elif isinstance(cmd, CounterWrite):
            self.write(cmd, [writes.counter_write(s, cmd)])
        elif isinstance(cmd, RegisterWrite):
            self.write(cmd, [writes.register_write(s, cmd)])
        elif isinstance(cmd, RegisterReset):
            self.write(cmd, writes.register_reset(s, cmd))
        elif isinstance(cmd, MeterSetRates):
            self.write(cmd, writes.meter_rates(s, cmd))
        elif isinstance(cmd, CheckCounter):
            self.sw.settle()
            self._check_counter(cmd)
        elif isinstance(cmd, ReadOnly):
            pass
        elif isinstance(cmd, NoPacket):
            raise writes.Unsupported("no_packet has no defined meaning on "
                                     f"v1model (p4c's bmv2 driver fails on it too)")
        else:  # pragma: no cover - the Command union is closed
            raise writes.Unsupported(type(cmd).__name__)

    def _remove_all(self, cmd: RemoveAll) -> None:
        ups = []
        for t in self.schema.tables:
            for e in self.sw.read([table_wildcard(t)]):
                entry = TableEntry.decode(e, self.schema)
                if not entry.is_default:
                    ups.append(update(DELETE, TableEntry(entry.table, entry.match,
                                                         priority=entry.priority), self.schema))
        self.write(cmd, ups)

    def _check_counter(self, cmd: CheckCounter) -> None:
        direct = cmd.index.startswith("$")
        if direct:
            te = self.entries.get(cmd.index[1:])
            if te is None:
                raise writes.StfValueError(f"no entry was added as '{cmd.index[1:]}'")
            q = DirectCounterCell(te).encode(self.schema)
        else:
            kind, c = names.counter(self.schema, cmd.counter)
            if kind != "counter":
                raise writes.Unsupported("a direct counter is checked through an entry id "
                                         "($ID), not an index")
            q = counter_wildcard(self.schema, c.name, int(cmd.index))
        try:
            got = self.sw.read([q])
        except ClientError as exc:
            raise _Stop(Verdict.REFUSED, f"line {cmd.line}: counter read refused: "
                                         f"{refusal(exc)}") from None
        data = (got[0].direct_counter_entry.data if direct
                else got[0].counter_entry.data) if got else None
        counts = {"packets": data.packet_count if data else 0,
                  "bytes": data.byte_count if data else 0}
        kind_name = cmd.kind or "packets"
        value = counts[kind_name]
        if not _OPS[cmd.op](value, cmd.value):
            self.counter_problems.append(Mismatch(
                None, cmd.line, f"check_counter {cmd.counter}({cmd.index}): {kind_name} = {value}, "
                              f"expected {cmd.op} {cmd.value}"))


#: What the runner cannot express (a name, a value, a command): the test is UNSUPPORTED.
_CANNOT = (SchemaLookupError, LiteralError, writes.StfValueError, writes.Unsupported)


def run_commands(commands: Sequence[Command], json_path: Path, p4info_path: Path,
                 work_dir: Path | None = None) -> Outcome:
    """Run parsed commands on a fresh netsum-switch loaded with the given program."""
    start = time.monotonic()
    ports = sorted({c.port for c in commands if isinstance(c, (Packet, Expect))})
    try:
        # Not the library's load_p4info: a program without tables (a parser test) has a P4Info
        # without tables or actions, which that refuses as a likely wrong file.
        p4info = parse_p4info(p4info_path.read_bytes(),
                              "bin" if p4info_path.suffix == ".bin" else "text", str(p4info_path))
        device_config = json_path.read_bytes()
    except Exception as exc:  # noqa: BLE001 - a broken compiler output is reported, not raised
        return Outcome(Verdict.REFUSED, f"cannot read the program: {exc}")
    schema = Schema(p4info)
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="netsum-stf-")
        work_dir = Path(tmp.name)
    player: _Player | None = None
    try:
        with NetsumSwitch(ports, work_dir) as sw:
            try:
                sw.set_pipeline(p4info, device_config)
            except ClientError as exc:
                return _done(start, Verdict.REFUSED, f"at load: {refusal(exc)}")
            player = _Player(sw, schema)
            for cmd in commands:
                try:
                    player.play(cmd)
                except _CANNOT as exc:
                    return _done(start, Verdict.UNSUPPORTED, f"line {cmd.line}: {exc}")
            sw.settle()
            sw.drain_quiet()
            if not sw.alive():
                return _done(start, Verdict.ERROR, f"the switch died: {sw.log_tail()}")
            problems = compare_ports(player.expects, sw.received, ports)
            problems += player.counter_problems
            out = sum(map(len, sw.received.values()))
            rec = {p: [f.hex() for f in fs] for p, fs in sw.received.items()}
            if problems:
                return _done(start, Verdict.WRONG, str(problems[0]),
                             tuple(str(p) for p in problems), player.frames_in, out, rec)
            return _done(start, Verdict.PASS, "", (), player.frames_in, out, rec)
    except _Stop as stop:
        return _done(start, stop.verdict, stop.reason)
    except _CANNOT as exc:
        return _done(start, Verdict.UNSUPPORTED, str(exc))
    except TargetError as exc:
        return _done(start, Verdict.ERROR, str(exc))
    finally:
        if tmp is not None:
            tmp.cleanup()


def _done(start: float, verdict: Verdict, reason: str, details: tuple[str, ...] = (),
          frames_in: int = 0, frames_out: int = 0,
          received: dict[int, list[str]] | None = None) -> Outcome:
    return Outcome(verdict, reason, details, time.monotonic() - start, frames_in, frames_out,
                   received or {})


def run_test(stf_path: Path, json_path: Path, p4info_path: Path,
             work_dir: Path | None = None) -> Outcome:
    """Parse `stf_path` and run it (a syntax error is UNSUPPORTED, naming the line)."""
    try:
        commands = parse_stf_file(stf_path)
    except (StfError, OSError) as exc:
        return Outcome(Verdict.UNSUPPORTED, f"stf: {exc}")
    return run_commands(commands, json_path, p4info_path, work_dir)
