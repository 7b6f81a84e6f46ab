"""`netsum-ctl`: the command line of the controller (argument parsing and the error edge).

Verbs a simple_switch_CLI user already knows (`table_add T A keys => params [prio]`,
`table_dump`, `mc_mgrp_create`, `counter_read`, ...) plus topology-wide ones (`setup`, `run`,
`job ...`, `stats`, `dropsim set`) and `shell` (p4runtime-shell on the same switch).  This is
the only place that turns exceptions into a one-line message and an exit status; with --debug a
traceback is shown instead.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import NoReturn, Sequence, TextIO

from netsum.controller.commands import COMMANDS, Ctx
from netsum.controller.errors import ControllerError
from netsum.controller.session import ProgramBuild
from netsum.wire import K_DEFAULT, K_SUPPORTED

__all__ = ["main", "build_parser"]

PROG = "netsum-ctl"
EXIT_ERROR = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (and never exits by itself)."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see --help)")


def _election(text: str) -> tuple[int, int]:
    parts = text.split(",")
    try:
        got = [int(x, 0) for x in parts]
    except ValueError:
        got = []
    if len(got) in (1, 2) and all(0 <= x < 1 << 64 for x in got):
        return (0, got[0]) if len(got) == 1 else (got[0], got[1])
    raise argparse.ArgumentTypeError(f"{text!r} is not an election id (LOW or HIGH,LOW, each "
                                     "0..2^64-1)")


def _uint(bits: int) -> Callable[[str], int]:
    """An argparse type: an integer that fits an unsigned field of `bits` bits (P4Runtime's
    device id and election id halves are uint64)."""
    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not 0 <= v < 1 << bits:
            raise argparse.ArgumentTypeError(f"{text} is out of range 0..2^{bits}-1")
        return v
    return parse


def _seconds(low: float, high: float, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds in (low, high] (or 0 where 0 means off).
    float() takes "nan", "inf" and "1e999": a NaN timeout waits forever, an infinite sleep
    overflows, so neither may pass as a setting."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(v) or not (low < v <= high or (zero and v == 0)):
            span = f"{'0 or ' if zero else ''}more than {low:g} and at most {high:g}"
            raise argparse.ArgumentTypeError(f"{text!r} seconds: give {span}")
        return v
    return parse


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option given before the verb is not reset by the subparser's default.
    S = argparse.SUPPRESS
    g = p.add_argument_group("switch and output")
    g.add_argument("--grpc-addr", default=S, metavar="HOST:PORT",
                   help="P4Runtime server (default 127.0.0.1:9559)")
    g.add_argument("--device-id", type=_uint(64), default=S, metavar="N",
                   help="P4Runtime device id (default 0, as simple_switch_grpc)")
    g.add_argument("--election-id", type=_election, default=S, metavar="HIGH,LOW",
                   help="election id (default 0,1)")
    g.add_argument("--p4info", default=S, metavar="FILE",
                   help="P4Info (text/JSON/binary); default: read it from the switch")
    g.add_argument("--topo", default=S, metavar="FILE", help="topology/job file (YAML/JSON)")
    g.add_argument("--switch", default=S, metavar="NAME", help="which switch of --topo")
    g.add_argument("--json", action="store_true", default=S, help="print JSON for scripts")
    g.add_argument("--timeout", type=_seconds(0, 3600), default=S, metavar="S",
                   help="seconds to wait for the switch (default 5)")
    g.add_argument("--debug", action="store_true", default=S,
                   help="show tracebacks and library logs")


_DEFAULTS = {"grpc_addr": "127.0.0.1:9559", "device_id": 0, "election_id": (0, 1),
             "p4info": None, "topo": None, "switch": None, "json": False, "timeout": 5.0,
             "debug": False}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="P4Runtime control of netsum switches (embedded or "
                "simple_switch_grpc): tables, multicast, counters, jobs, statistics.")
    _common(p)
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        _common(sp)
        return sp

    def group(name: str, help_: str) -> argparse._SubParsersAction:
        gp = sub.add_parser(name, help=help_, description=help_)
        _common(gp)
        return gp.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)

    def action(g: argparse._SubParsersAction, name: str, help_: str) -> argparse.ArgumentParser:
        ap = g.add_parser(name, help=help_, description=help_)
        _common(ap)
        return ap

    for name, help_ in (("table_add", "insert an entry: T A keys... => params... [priority]"),
                        ("table_modify", "change an entry's action: T A keys... => params... "
                         "[priority]")):
        sp = verb(name, help_)
        sp.add_argument("table")
        sp.add_argument("action")
        sp.add_argument("words", nargs=argparse.REMAINDER,
                        help="keys (exact v, lpm a.b.c.d/len, ternary v&&&mask, range lo->hi), "
                        "=>, action parameters, then the priority for ternary/range tables")
    sp = verb("table_delete", "delete the entry with these keys: T keys... [priority]")
    sp.add_argument("table")
    sp.add_argument("words", nargs=argparse.REMAINDER)
    sp = verb("table_set_default", "set a table's default action: T A params...")
    sp.add_argument("table")
    sp.add_argument("action")
    sp.add_argument("params", nargs="*")
    sp = verb("table_dump", "list a table's entries (and its default)")
    sp.add_argument("table")
    sp = verb("table_clear", "delete every entry of a table")
    sp.add_argument("table")
    sp = verb("counter_read", "read a counter (one index, or every non-zero cell)")
    sp.add_argument("counter")
    sp.add_argument("index", nargs="?")
    sp = verb("counter_reset", "zero a counter (one index, or all)")
    sp.add_argument("counter")
    sp.add_argument("index", nargs="?")
    sp = verb("mc_mgrp_create", "create a multicast group: MGID [PORT[:RID]...]")
    sp.add_argument("mgid")
    sp.add_argument("replicas", nargs="*", metavar="PORT[:RID]")
    sp = verb("mc_mgrp_destroy", "delete a multicast group")
    sp.add_argument("mgid")
    sp = verb("mc_node_associate", "add replicas with one rid to a group: MGID RID PORT...")
    sp.add_argument("mgid")
    sp.add_argument("rid")
    sp.add_argument("ports", nargs="+")
    sp = verb("mc_node_dissociate", "remove a group's replicas with this rid: MGID RID")
    sp.add_argument("mgid")
    sp.add_argument("rid")
    verb("mc_dump", "list multicast groups")
    for name, what in (("set_queue_depth", "DEPTH packets"),
                       ("set_queue_rate", "RATE packets/s, 0 = not limited")):
        sp = verb(name, f"egress queue {what.split()[0].lower()} of a port (or of all ports): "
                  f"{what} [PORT]")
        sp.add_argument("value", metavar=what.split()[0])
        sp.add_argument("port", nargs="?")

    pg = group("pipeline", "the forwarding pipeline")
    ap = action(pg, "push", "install a program (default: p4/netsum.p4, built as needed); "
                "with --topo, on every switch")
    ap.add_argument("bmv2_json", nargs="?", metavar="BMV2_JSON")
    ap.add_argument("--k", type=int, choices=K_SUPPORTED, default=K_DEFAULT,
                    help="values per packet of the netsum build")
    action(pg, "show", "what the switch runs")

    for name, help_ in (("setup", "push the pipeline to every switch of --topo, install "
                         "forwarding and the file's jobs"),
                        ("run", "setup, then watch the switches and restore any that restart")):
        sp = verb(name, help_)
        sp.add_argument("bmv2_json", nargs="?", metavar="BMV2_JSON")
        sp.add_argument("--k", type=int, choices=K_SUPPORTED, default=K_DEFAULT)
        if name == "run":
            sp.add_argument("--interval", type=_seconds(0, 3600), default=1.0, metavar="S")
            sp.add_argument("--stuck-after", type=_seconds(0, 86400, zero=True), default=30.0,
                            metavar="S",
                            help="reclaim a job whose retransmissions keep arriving with no "
                                 "RESULT going out for S seconds (default 30; 0: never)")
            sp.add_argument("--attach", action="store_true",
                            help="take over switches that already run the pipeline (a "
                                 "controller restarted): adopt their tables, groups and jobs "
                                 "and write nothing, so running jobs go on")

    jg = group("job", "aggregation jobs across the switches of --topo")
    ap = action(jg, "create", "create a job (from the file, or --workers/--slots)")
    ap.add_argument("job_id", type=int)
    ap.add_argument("--workers", metavar="H1,H2,...")
    ap.add_argument("--slots", type=int, metavar="N")
    action(jg, "list", "jobs, their slot ranges and the free slots")
    action(jg, "delete", "remove a job everywhere").add_argument("job_id", type=int)
    action(jg, "reset", "zero a job's counters and re-assert its entries").add_argument(
        "job_id", type=int)
    ap = action(jg, "fail", "a job's worker died: name who is missing and reclaim the job's "
                "slots (entries, group, slots freed; new epoch)")
    ap.add_argument("job_id", type=int)
    ap.add_argument("--rank", type=int, metavar="R", help="the rank that failed, as reported")
    action(jg, "reap", "reclaim every leased job whose lease is dead: expired, or its owner "
           "gone from this machine (jobs without a lease are not touched)")

    sp = verb("stats", "per-job counters on every switch of --topo")
    sp.add_argument("--watch", type=_seconds(0, 86400), metavar="S",
                    help="refresh every S seconds")
    sp.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N")
    sp.add_argument("--ports", action="store_true",
                    help="per-port drop-simulator counters instead of per-job counters")

    dg = group("dropsim", "the drop simulator (loss experiments)")
    ap = action(dg, "set", "drop netsum packets on a port with a probability")
    ap.add_argument("port", type=_uint(9))
    ap.add_argument("probability", type=float)
    ap.add_argument("--direction", choices=("in", "out", "both"), default="in")

    tg = group("topo", "the topology/job file")
    ap = action(tg, "show", "validate --topo as setup does, against the program (--p4info, "
                "or p4/netsum.p4 built for --k), and show where each job goes (no switch "
                "contacted)")
    ap.add_argument("--k", type=int, choices=K_SUPPORTED, default=K_DEFAULT)

    sp = verb("shell", "open p4runtime-shell on the same switch")
    sp.add_argument("bmv2_json", nargs="?", metavar="BMV2_JSON",
                    help="with --p4info: push this config as the shell starts")
    sp.add_argument("--dry-run", action="store_true", help="print the command only")
    return p


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    # Common options may come anywhere, even after `table_add ... => ...` whose words argparse
    # collects verbatim (REMAINDER): take them out first.  Keys and values never start with --.
    pre = _Parser(prog=PROG, add_help=False)
    _common(pre)
    common, rest = pre.parse_known_args(list(argv))
    args = build_parser().parse_args(rest)
    for k, v in vars(common).items():
        setattr(args, k, v)
    if not args.verb:
        raise _UsageError(f"{PROG}: give a verb (see --help)")
    key = args.verb
    if getattr(args, "action", None) is not None and f"{args.verb} {args.action}" in COMMANDS:
        key = f"{args.verb} {args.action}"
    if key not in COMMANDS:
        raise _UsageError(f"{PROG} {args.verb}: give an action (see {PROG} {args.verb} --help)")
    args.command = key
    args.grpc_addr_given = hasattr(args, "grpc_addr")
    args.election_id_given = hasattr(args, "election_id")
    for k, v in _DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    return args


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None, build: ProgramBuild | None = None) -> int:
    """`build` makes the program verbs push when no --p4info is given (netsum.ctl passes
    netsum.p4's build; without it those verbs need --p4info and a JSON)."""
    out = out or sys.stdout
    err = err or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parse(argv)
    except _UsageError as exc:
        err.write(f"{exc}\n")
        return EXIT_USAGE
    except SystemExit as exc:   # --help
        return int(exc.code or 0)
    if not args.debug:
        # Libraries log stream failures (up to CRITICAL), and gRPC's core prints a line when a
        # switch goes away ("Got goaway"); the error below says it in one line.  gRPC reads
        # its verbosity when it first starts a channel, so this still takes effect here.
        logging.disable(logging.CRITICAL)
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        return COMMANDS[args.command](Ctx(args, out, build))
    except ControllerError as exc:
        if args.debug:
            raise
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # the promise is "never a traceback"; --debug shows it
        if args.debug:
            raise
        err.write(f"{PROG}: internal error: {type(exc).__name__}: {exc} (rerun with --debug)\n")
        return 70
    finally:
        logging.disable(logging.NOTSET)


if __name__ == "__main__":
    sys.exit(main())
