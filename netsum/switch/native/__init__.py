"""Native backend: the packet path of a BMv2 JSON program as generated C (optional).

`plan(pl)` decides at load time, before the reference code is compiled, whether the program
runs natively: it generates the C (netsum/switch/native/cpipe.py) or declines with a reason (logged,
`Pipeline.native_status`), and moves the registers and counters into numpy buffers both
paths share.  `NativeRunner` (built at the end of the load) compiles and loads the module and
keeps it in step with the control plane: the Python `Table` and `PRE` objects stay the one
source of truth; each change marks the runner dirty and the next packet reloads their
entries into C first.  Selection: `NETSUM_NATIVE=0` never, `=1` always tried, unset: when a
C compiler and CPython's headers are present.

A module not yet in the cache is compiled in a background thread when the choice is
automatic (`Pipeline(native=None)`, what `Device.build_pipeline` and so the daemon and
P4Runtime use): compiling netsum.p4 takes 4-10 s at any K (croll.py), longer than a
P4Runtime client waits for SetForwardingPipelineConfig.  Until it is ready the Python path
runs every packet; the switch-over happens between two packets, and since both paths share
all state it is invisible.  `Pipeline(native=True)` and `NETSUM_NATIVE=1` build at load instead.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any

import numpy as np

from netsum.switch.entries import Range
from netsum.switch.native.build import BuildError, available, build_module, is_built, module_name
from netsum.switch.native.cexpr import Decline
from netsum.switch.native.cgen import RegInfo
from netsum.switch.native.cpipe import Program, TableInfo, generate

__all__ = ["plan", "load", "NativeRunner", "Decline", "wanted", "wait_for_build"]

# Not under "netsum.switch": the daemon logs that to its console, whose first line must stay
# the ready line (a module loaded from the cache is reported before it).
log = logging.getLogger("netsum.native")
_STATS = ("dropped", "parser_errors", "truncated", "checksum_errors", "register_oob",
          "counter_oob", "digests")
U64 = (1 << 64) - 1


def wanted(native: bool | None) -> tuple[bool, str]:
    """(try it, why not) for Pipeline(native=...): None = automatic."""
    env = os.environ.get("NETSUM_NATIVE", "").strip()
    if native is False or (native is None and env == "0"):
        return False, "off"
    why = available()
    if why is not None:
        return False, why
    return True, ""


def wait_for_build(native: bool | None) -> bool:
    """Build at load (True) or in the background when not cached (False)?"""
    return native is True or os.environ.get("NETSUM_NATIVE", "").strip() == "1"


def _decline(pl: Any, why: str) -> None:
    pl.native_status = f"declined: {why}"
    log.info("native backend: %s", pl.native_status)


def plan(pl: Any) -> Program | None:
    """Generate the program's C or decline; on success the registers and counters of `pl`
    are numpy-backed from now on (the reference code is compiled against that storage)."""
    regs = {}
    for k, (name, r) in enumerate(pl.registers.items()):
        isz = r.values.dtype.itemsize if r.fused else 8
        regs[name] = RegInfo(k, r.size, r.bitwidth, isz)
    if any(c.is_direct for c in pl.counters.values()):
        _decline(pl, "direct counters")
        return None
    ctrs = {name: (k, c.size) for k, (name, c) in enumerate(pl.counters.items())}
    try:
        prog = generate(pl.json, pl.layout, pl.std, regs, ctrs, pl.uses_timestamps,
                        pl.checksums, pl.action_defs, pl.parser, pl.deparser, pl.controls,
                        getattr(pl, "lanes", None))
    except Decline as e:
        _decline(pl, str(e))
        return None
    except Exception as e:       # a shape the Python loader accepted but the generator not
        _decline(pl, f"generator failed ({type(e).__name__}: {e})")
        return None
    for r in pl.registers.values():
        if not r.fused:
            r.bind(np.zeros(r.size, dtype=np.uint64))
    for c in pl.counters.values():
        c.use_arrays()
    return prog


def load(pl: Any, prog: Program, wait: bool) -> threading.Thread | None:
    """Compile (or take from the cache) and start the runner: at once when cached or `wait`,
    else in a background thread (returned), `pl.native_status` "building" meanwhile."""
    if wait or is_built(prog.source):
        _start(pl, prog)
        return None
    pl.native_status = "building"
    t = threading.Thread(target=_start, args=(pl, prog), name="netsum-native-build", daemon=True)
    t.start()
    return t


def _start(pl: Any, prog: Program) -> None:
    try:
        runner = NativeRunner(pl, prog)
    except BuildError as e:
        pl.native_status = f"build failed: {e}"
        log.warning("native backend: %s", pl.native_status)
    except Exception as e:       # never the switch's problem: the Python path stays
        pl.native_status = f"build failed: {type(e).__name__}: {e}"
        log.warning("native backend: %s", pl.native_status)
    else:
        pl.native = runner       # published last: the packet path adopts it from here on
        pl.native_status = "native"
        log.info("native backend: in use (%s)", module_name(prog.source))


def _split(table: Any, value: int, k: int) -> int:
    """Field k's part of a concatenated key/mask of `netsum.switch.tables.Table`."""
    shift = table._shifts[k]
    assert shift is not None
    return (value >> shift) & ((1 << table.key[k].bitwidth) - 1)


def _check_rows(pl: Any, prog: Program) -> None:
    """A lane loop addresses the registers of one family as one row (cvec.py): their storage
    must be consecutive columns of one array, as lanes.py fuses them."""
    for names in prog.lane_regs:
        views = [pl.registers[n].values for n in names]
        at = [v.__array_interface__["data"][0] for v in views]
        isz = views[0].dtype.itemsize
        if any(v.strides != views[0].strides or v.dtype != views[0].dtype for v in views) or \
                any(x != at[0] + k * isz for k, x in enumerate(at)):
            raise BuildError(f"registers {names[0]}..{names[-1]} are not one row of columns")


class NativeRunner:
    """The loaded module of one pipeline and its context."""

    def __init__(self, pl: Any, prog: Program) -> None:
        self.mod = build_module(prog.source)
        self.ctx = self.mod.new()
        self.process = self.mod.process
        #: the C port loop's entry into this context (netsum/switch/native/io.py, nsio.h)
        self.pipe = self.mod.pipe(self.ctx)
        self.pl = pl
        self.prog = prog
        for name, r in pl.registers.items():
            self.mod.bind_reg(self.ctx, prog.regs[name].index, r.values,
                              prog.regs[name].itemsize)
        for name, c in pl.counters.items():
            self.mod.bind_ctr(self.ctx, prog.ctrs[name], c.packets, c.bytes)
        _check_rows(pl, prog)
        self.dirty_tables: set[str] = set(prog.tables)
        self.dirty_pre = True
        self.dirty = True
        for name in prog.tables:
            pl.tables[name].on_change = self._table_changed
        pl.pre.on_change = self._pre_changed

    def _table_changed(self, table: Any) -> None:
        self.dirty_tables.add(table.name)
        self.dirty = True

    def _pre_changed(self) -> None:
        self.dirty_pre = True
        self.dirty = True

    def set_misc(self, drop_port: int, digest: Any) -> None:
        rng = self.pl.rng
        self.mod.set_misc(self.ctx, drop_port, rng.randint, rng.getrandbits, digest)

    def take_stats(self, stats: Any) -> None:
        for name, v in zip(_STATS, self.mod.take_stats(self.ctx)):
            if v:
                setattr(stats, name, getattr(stats, name) + v)

    # -- control plane -> C ----------------------------------------------------------------
    def flush(self) -> None:
        for name in sorted(self.dirty_tables):
            self._load_table(self.prog.tables[name], self.pl.tables[name])
        self.dirty_tables.clear()
        if self.dirty_pre:
            words: list[int] = []
            for mgid, reps in self.pl.pre.mc_groups().items():
                words += [mgid, len(reps)]
                for r in reps:
                    words += [r.port, r.rid]
            self.mod.mc_load(self.ctx, words)
            self.dirty_pre = False
        self.dirty = False

    def _act(self, info: TableInfo, rec: Any, words: list[int]) -> None:
        assert rec.entry is not None
        words.append(info.actions.index(rec.entry.action.action))
        params = list(rec.params) + [0] * (info.np - len(rec.params))
        words += params

    def _load_table(self, info: TableInfo, t: Any) -> None:
        words: list[int] = []
        levels: list[int] = []
        n = 0
        if info.kind == 1:
            for key, rec in t._exact.items():
                words += list(key) if isinstance(key, tuple) else [key]
                self._act(info, rec, words)
                n += 1
            levels = [n] + [U64] * info.nk
        elif info.kind == 2:
            for _plen, mask, d in t._lpm:
                levels += [len(d)] + [_split(t, mask, k) for k in range(info.nk)]
                for value, rec in d.items():
                    words += [_split(t, value, k) for k in range(info.nk)]
                    self._act(info, rec, words)
                    n += 1
        elif info.kind == 3:
            for rec in t._sorted:
                m, v, lo, hi = [], [], [], []
                for k, match in enumerate(rec.entry.key):
                    if isinstance(match, Range):
                        m.append(0)
                        v.append(0)
                        lo.append(match.low)
                        hi.append(match.high)
                        continue
                    m.append(_split(t, rec.mask, k))
                    v.append(_split(t, rec.value, k))
                    lo.append(0)
                    hi.append(U64)
                words += m + v + lo + hi
                self._act(info, rec, words)
                n += 1
        d = t.default
        dact = info.actions.index(d.action) if d.action else -1
        self.mod.table_load(self.ctx, info.index, n, words, levels, dact, list(d.params))

