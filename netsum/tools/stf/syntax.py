"""STF (simple test framework) files: the text format of p4c's behavioural tests, parsed into
commands.

An STF file is one command per line; `#` starts a comment.  Keywords are case-insensitive.
The commands and their meaning on a v1model target (as p4c's bmv2 test driver gives them):

    add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE, ...) [= ID]
    setdefault TABLE ACTION(PARAM:VALUE, ...)
    remove all
    packet PORT HEX...                 inject a frame on PORT
    expect PORT [HEX|*]... [$]         one frame on PORT; `*` = any nibble, `$` = exact length
    no_packet
    wait
    check_counter NAME(INDEX|$ID) [packets|bytes OP NUMBER]
    mirroring_add SESSION PORT | mirroring_add_mc SESSION GROUP | mirroring_delete SESSION
    mc_mgrp_create GROUP | mc_node_create RID PORT... | mc_node_update HANDLE PORT...
    mc_node_associate GROUP HANDLE
    counter_read NAME INDEX | counter_write NAME INDEX PACKETS BYTES
    register_read NAME INDEX | register_write NAME INDEX VALUE | register_reset NAME
    meter_get_rates NAME INDEX | meter_set_rates NAME INDEX RATE:BURST...
    meter_array_set_rates NAME RATE:BURST...

Numbers are decimal, `0x` hex or `0b` binary; in a key value a hex or binary digit may be `*`
(don't care).  Names may be dotted and indexed (`hdr.extra[0].h`, or `extra$0.h`).
Parsing is pure: no P4Info is needed; names are resolved when the commands are executed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from netsum.tools.stf.commands import (StfError, Number, KeyMatch, ActionCall, Add, SetDefault,
                                 RemoveAll, Packet, Expect, NoPacket, Wait, CheckCounter,
                                 MirroringAdd, MirroringAddMc, MirroringDelete, McGroupCreate,
                                 McNodeCreate, McNodeUpdate, McNodeAssociate, CounterWrite,
                                 RegisterWrite, RegisterReset, MeterSetRates, ReadOnly, Command)

__all__ = [
    "StfError", "Number", "KeyMatch", "ActionCall", "Add", "SetDefault", "RemoveAll", "Packet",
    "Expect", "NoPacket", "Wait", "CheckCounter", "MirroringAdd", "MirroringAddMc",
    "MirroringDelete", "McGroupCreate", "McNodeCreate", "McNodeUpdate", "McNodeAssociate",
    "CounterWrite", "RegisterWrite", "RegisterReset", "MeterSetRates", "ReadOnly", "Command",
    "parse_stf", "parse_stf_file",
]

# -- tokens ------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+)
  | (?P<number>0[xX][0-9a-fA-F*]+|0[bB][01*]+|[0-9]+)
  | (?P<name>"[^"]+"|[a-zA-Z_$][a-zA-Z_$0-9]*)
  | (?P<op>==|!=|<=|>=|<|>|[():,.\[\]/=])
""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str       # "number" | "name" | "op"
    text: str
    col: int


class _Line:
    """The tokens of one command line, consumed left to right."""

    def __init__(self, where: str, lineno: int, text: str) -> None:
        self.where, self.lineno = where, lineno
        self.toks: list[_Tok] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise StfError(where, lineno, f"column {pos + 1}: unexpected character "
                                              f"'{text[pos]}'")
            kind = m.lastgroup or ""
            if kind != "space":
                tok = m.group()
                if kind == "name" and tok.startswith('"'):
                    tok = tok[1:-1]
                self.toks.append(_Tok(kind, tok, pos + 1))
            pos = m.end()
        self.i = 0

    def error(self, message: str) -> StfError:
        return StfError(self.where, self.lineno, message)

    def peek(self, text: str | None = None) -> bool:
        if self.i >= len(self.toks):
            return False
        return text is None or self.toks[self.i].text == text

    def next(self, kind: str, what: str) -> str:
        if self.i >= len(self.toks):
            raise self.error(f"expected {what} at the end of the line")
        tok = self.toks[self.i]
        if tok.kind != kind:
            raise self.error(f"column {tok.col}: expected {what}, found '{tok.text}'")
        self.i += 1
        return tok.text

    def expect(self, op: str) -> None:
        if not self.peek(op):
            found = f"'{self.toks[self.i].text}'" if self.i < len(self.toks) else "end of line"
            raise self.error(f"expected '{op}', found {found}")
        self.i += 1

    def end(self) -> None:
        if self.i < len(self.toks):
            tok = self.toks[self.i]
            raise self.error(f"column {tok.col}: unexpected '{tok.text}' after the command")

    # qualified_name : NAME ('[' DEC ']')? ('.' NAME ('[' DEC ']')?)*
    def qualified_name(self, what: str = "a name") -> str:
        parts = [self._indexed(what)]
        while self.peek("."):
            self.i += 1
            parts.append(self._indexed(what))
        return ".".join(parts)

    def _indexed(self, what: str) -> str:
        name = self.next("name", what)
        if self.peek("["):
            self.i += 1
            idx = self.next("number", "an index")
            self.expect("]")
            name += f"[{idx}]"
        return name

    def number(self, what: str = "a number") -> Number:
        return Number(self.next("number", what))

    def integer(self, what: str) -> int:
        n = self.number(what)
        if n.has_wildcards:
            raise self.error(f"{what} '{n}' may not have '*' digits")
        return n.value()

    # action : qualified_name '(' [NAME ':' number (',' NAME ':' number)*] ')'
    def action(self) -> ActionCall:
        name = self.qualified_name("an action name")
        self.expect("(")
        args: list[tuple[str, Number]] = []
        while not self.peek(")"):
            if args:
                self.expect(",")
            pname = self.next("name", "an action parameter")
            self.expect(":")
            args.append((pname, self.number("a parameter value")))
        self.expect(")")
        return ActionCall(name, tuple(args))


def _data_nibbles(where: str, lineno: int, text: str, allow_masks: bool) -> tuple[str, bool]:
    """Packet data: hex digits (spaces between them ignored); for an expect also `*` and a
    final `$`.  Returns (upper-case nibbles, exact_length)."""
    data = "".join(text.split())
    exact = False
    if allow_masks and data.endswith("$"):
        exact, data = True, data[:-1]
    allowed = "0123456789abcdefABCDEF" + ("*" if allow_masks else "")
    for ch in data:
        if ch not in allowed:
            raise StfError(where, lineno, f"bad packet data character '{ch}' "
                                          f"(hex digits{', * and a final $' if allow_masks else ''})")
    return data.upper(), exact


def _parse_line(where: str, lineno: int, text: str) -> Command | None:
    body = text.split("#", 1)[0].strip()
    if not body:
        return None
    verb, _, rest = body.partition(" ")
    if "\t" in verb:
        verb, _, more = verb.partition("\t")
        rest = more + " " + rest
    verb = verb.lower()
    if verb in ("packet", "expect"):
        port_text, _, data = rest.strip().partition(" ")
        if not port_text.isdigit():
            raise StfError(where, lineno, f"{verb}: expected a port number, found '{port_text}'")
        port = int(port_text)
        if verb == "packet":
            nibbles, _ = _data_nibbles(where, lineno, data, allow_masks=False)
            if not nibbles or len(nibbles) % 2:
                raise StfError(where, lineno, "packet: data must be a whole number of bytes "
                                              f"({len(nibbles)} hex digits)")
            return Packet(lineno, port, bytes.fromhex(nibbles))
        nibbles, exact = _data_nibbles(where, lineno, data, allow_masks=True)
        if not nibbles and not exact:
            return Expect(lineno, port, None)
        return Expect(lineno, port, nibbles, exact)
    ln = _Line(where, lineno, rest)
    cmd = _parse_verb(ln, verb)
    ln.end()
    return cmd


def _parse_verb(ln: _Line, verb: str) -> Command:
    line = ln.lineno
    if verb == "add":
        table = ln.qualified_name("a table name")
        priority = None
        if ln.peek() and ln.toks[ln.i].kind == "number":
            priority = ln.integer("a priority")
        keys: list[KeyMatch] = []
        # key : qualified_name ':' number ['/' DEC]; the action is the name followed by '('
        while ln.peek() and not _action_ahead(ln):
            kname = ln.qualified_name("a key field name")
            ln.expect(":")
            value = ln.number("a key value")
            plen = None
            if ln.peek("/"):
                ln.i += 1
                plen = ln.integer("a prefix length")
            keys.append(KeyMatch(kname, value, plen))
        action = ln.action()
        entry_id = None
        if ln.peek("="):
            ln.i += 1
            entry_id = ln.next("name", "an entry id")
        return Add(line, table, priority, tuple(keys), action, entry_id)
    if verb == "setdefault":
        table = ln.qualified_name("a table name")
        return SetDefault(line, table, ln.action())
    if verb == "remove":
        word = ln.next("name", "'all'")
        if word.lower() != "all":
            raise ln.error("remove: only 'remove all' is defined")
        return RemoveAll(line)
    if verb == "no_packet":
        return NoPacket(line)
    if verb == "wait":
        return Wait(line)
    if verb == "check_counter":
        name = ln.qualified_name("a counter name")
        ln.expect("(")
        if ln.peek() and ln.toks[ln.i].kind == "number":
            index = str(ln.integer("a counter index"))
        else:
            index = ln.next("name", "a counter index or $ID")
        ln.expect(")")
        if not ln.peek():
            return CheckCounter(line, name, index, None, "==", 0)
        kind = ln.next("name", "'packets' or 'bytes'").lower()
        if kind not in ("packets", "bytes"):
            raise ln.error(f"check_counter: expected 'packets' or 'bytes', found '{kind}'")
        op = ln.next("op", "a comparison")
        if op not in ("==", "!=", "<", "<=", ">", ">="):
            raise ln.error(f"check_counter: '{op}' is not a comparison")
        return CheckCounter(line, name, index, kind, op, ln.integer("a count"))
    if verb == "mirroring_add":
        return MirroringAdd(line, ln.integer("a session id"), ln.integer("a port"))
    if verb == "mirroring_add_mc":
        return MirroringAddMc(line, ln.integer("a session id"), ln.integer("a group id"))
    if verb == "mirroring_delete":
        return MirroringDelete(line, ln.integer("a session id"))
    if verb == "mc_mgrp_create":
        return McGroupCreate(line, ln.integer("a group id"))
    if verb in ("mc_node_create", "mc_node_update"):
        first = ln.integer("a replication id" if verb == "mc_node_create" else "a node handle")
        ports = [ln.integer("a port")]
        while ln.peek():
            ports.append(ln.integer("a port"))
        if verb == "mc_node_create":
            return McNodeCreate(line, first, tuple(ports))
        return McNodeUpdate(line, first, tuple(ports))
    if verb == "mc_node_associate":
        return McNodeAssociate(line, ln.integer("a group id"), ln.integer("a node handle"))
    if verb == "counter_write":
        name = ln.qualified_name("a counter name")
        return CounterWrite(line, name, ln.integer("an index"), ln.integer("a packet count"),
                            ln.integer("a byte count"))
    if verb == "register_write":
        name = ln.qualified_name("a register name")
        return RegisterWrite(line, name, ln.integer("an index"), ln.integer("a value"))
    if verb == "register_reset":
        return RegisterReset(line, ln.qualified_name("a register name"))
    if verb in ("meter_set_rates", "meter_array_set_rates"):
        meter = ln.qualified_name("a meter name")
        cell = ln.integer("an index") if verb == "meter_set_rates" else None
        rates: list[tuple[float, int]] = []
        while ln.peek():
            rate = ln.number("a rate").text
            if ln.peek("."):
                ln.i += 1
                rate += "." + ln.number("a rate").text
            ln.expect(":")
            rates.append((float(rate), ln.integer("a burst size")))
        if not rates:
            raise ln.error(f"{verb}: expected RATE:BURST pairs")
        return MeterSetRates(line, meter, cell, tuple(rates))
    if verb in ("counter_read", "register_read", "meter_get_rates", "mirroring_get"):
        ln.i = len(ln.toks)           # arguments are not needed: nothing is checked
        return ReadOnly(line, verb)
    raise ln.error(f"unknown command '{verb}'")


def _action_ahead(ln: _Line) -> bool:
    """True when the tokens from here are `NAME(.NAME)* (`: the action call ends the keys."""
    j = ln.i
    toks = ln.toks
    while j < len(toks) and (toks[j].kind == "name" or toks[j].text in (".", "[", "]")
                             or (toks[j].kind == "number" and j > 0 and toks[j - 1].text == "[")):
        j += 1
    return j < len(toks) and toks[j].text == "("


def parse_stf(text: str, where: str = "<stf>") -> tuple[Command, ...]:
    """Every command of an STF text, in order.  Raises StfError at the first bad line."""
    out: list[Command] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        cmd = _parse_line(where, lineno, raw)
        if cmd is not None:
            out.append(cmd)
    return tuple(out)


def parse_stf_file(path: Path) -> tuple[Command, ...]:
    return parse_stf(path.read_text(errors="replace"), str(path))
