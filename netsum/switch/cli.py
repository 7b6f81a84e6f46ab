"""`netsum-switch`: the daemon, command line shaped like simple_switch_grpc.

    netsum-switch [bmv2 options] (prog.json | --no-p4) -- [target options]

Errors become one line on stderr at this one place: exit 2 for bad arguments, 1 for a program
or port that cannot be loaded/opened.  SIGINT/SIGTERM stop the loop; sockets, pcap files and the
P4Runtime server are closed on the way out.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from netsum.switch.device import Device
from netsum.switch.errors import ConfigError
from netsum.switch.jsonload import MAX_CONFIG_BYTES
from netsum.switch.ports import PortSet, PortSpec, parse_port_spec

__all__ = ["main", "UsageError", "Options", "parse_args"]

PROG = "netsum-switch"
LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "error": logging.ERROR, "off": logging.CRITICAL + 10}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


@dataclass(frozen=True, slots=True)
class Options:
    device_id: int
    ports: tuple[PortSpec, ...]
    pcap: Path | None
    log_console: bool
    log_file: Path | None
    log_level: str
    program: Path | None
    grpc_addr: str
    grpc: bool
    cpu_port: int | None
    drop_port: int
    seed: int | None
    #: (port or None for all, value) in command-line order
    queue_depths: tuple[tuple[int | None, int], ...] = ()
    queue_rates: tuple[tuple[int | None, int], ...] = ()
    #: TLS for the P4Runtime server (simple_switch_grpc's --grpc-server-ssl options).
    tls: Any = None


def _bmv2_parser() -> _Parser:
    p = _Parser(prog=PROG, add_help=True, description="BMv2-compatible software switch "
                "(bmv2 options before --, target options after)")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    p.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR")
    p.add_argument("--log-console", action="store_true")
    p.add_argument("--log-file", default=None)
    p.add_argument("-L", "--log-level", default="trace", choices=sorted(LEVELS))
    p.add_argument("--thrift-port", type=int, default=None, help="accepted and ignored")
    # Accepted so that scripts written for simple_switch_grpc run unchanged; no effect here.
    p.add_argument("--nanolog", default=None, help="accepted and ignored")
    p.add_argument("--notifications-addr", default=None, help="accepted and ignored")
    p.add_argument("--debugger", action="store_true", help="accepted and ignored")
    p.add_argument("--log-flush", action="store_true", help="accepted (logs are line-flushed)")
    p.add_argument("--dump-packet-data", type=int, default=None, help="accepted and ignored")
    p.add_argument("-v", "--version", action="version", version=f"{PROG} (netsum) 0.1.0")
    p.add_argument("--no-p4", action="store_true")
    p.add_argument("--seed", type=int, default=None, help="seed of random()/hash 'random'")
    p.add_argument("--no-grpc", action="store_true", help="also accepted after --")
    p.add_argument("program", nargs="?", default=None)
    return p


def _target_parser() -> _Parser:
    p = _Parser(prog=f"{PROG} ... --", add_help=True)
    p.add_argument("--grpc-server-addr", default="127.0.0.1:9559")
    p.add_argument("--cpu-port", type=int, default=None)
    p.add_argument("--drop-port", type=int, default=511)
    p.add_argument("--no-grpc", action="store_true")
    # simple_switch_CLI's set_queue_depth / set_queue_rate at start-up: N for every port or
    # PORT:N for one; repeatable, applied in order.
    p.add_argument("--queue-depth", action="append", default=[], metavar="[PORT:]PACKETS")
    p.add_argument("--queue-rate", action="append", default=[], metavar="[PORT:]PPS")
    # As simple_switch_grpc: TLS for anyone exposing P4Runtime beyond loopback (P4Runtime
    # itself authenticates no one: docs/p4runtime.md).
    p.add_argument("--grpc-server-ssl", action="store_true", help="serve P4Runtime over TLS")
    p.add_argument("--grpc-server-cacert", default=None, metavar="PEM",
                   help="CA certificate that signs client certificates")
    p.add_argument("--grpc-server-cert", default=None, metavar="PEM")
    p.add_argument("--grpc-server-key", default=None, metavar="PEM")
    p.add_argument("--grpc-server-with-client-auth", action="store_true",
                   help="require a client certificate signed by --grpc-server-cacert")
    return p


def _tls(t: argparse.Namespace) -> Any:
    named = [t.grpc_server_cacert, t.grpc_server_cert, t.grpc_server_key]
    if not t.grpc_server_ssl:
        if any(named) or t.grpc_server_with_client_auth:
            raise UsageError("--grpc-server-cacert/-cert/-key/-with-client-auth need "
                             "--grpc-server-ssl")
        return None
    if not t.grpc_server_cert or not t.grpc_server_key:
        raise UsageError("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    if t.grpc_server_with_client_auth and not t.grpc_server_cacert:
        raise UsageError("--grpc-server-with-client-auth needs --grpc-server-cacert")
    for f in named:
        if f is not None and not Path(f).is_file():
            raise UsageError(f"TLS file '{f}' not found")
    from netsum.switch.p4rt.server import TlsConfig
    return TlsConfig(Path(t.grpc_server_cert), Path(t.grpc_server_key),
                     Path(t.grpc_server_cacert) if t.grpc_server_cacert else None,
                     t.grpc_server_with_client_auth)


def _queue_setting(text: str, what: str) -> tuple[int | None, int]:
    port_s, sep, value_s = text.rpartition(":")
    try:
        value = int(value_s)
        port = int(port_s) if sep else None
    except ValueError:
        raise UsageError(f"--{what} '{text}' is not [PORT:]NUMBER") from None
    if port is not None and not 0 <= port <= 511:
        raise UsageError(f"--{what} '{text}': port {port} outside 0..511")
    return port, value


def parse_args(argv: list[str]) -> Options:
    if "--" in argv:
        cut = argv.index("--")
        head, tail = argv[:cut], argv[cut + 1:]
    else:
        head, tail = argv, []
    a = _bmv2_parser().parse_args(head)
    t = _target_parser().parse_args(tail)
    if a.no_p4 and a.program:
        raise UsageError("give either a program JSON or --no-p4, not both")
    if not a.no_p4 and not a.program:
        raise UsageError("a program JSON (or --no-p4) is required")
    try:
        ports = tuple(parse_port_spec(s) for s in a.interface)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if len({p.number for p in ports}) != len(ports):
        raise UsageError("the same port number is given twice with -i")
    if not 0 <= t.drop_port <= 511:
        raise UsageError(f"--drop-port {t.drop_port} outside 0..511")
    if t.cpu_port is not None:
        if not 0 < t.cpu_port <= 511 or t.cpu_port == t.drop_port:
            raise UsageError(f"--cpu-port {t.cpu_port} must be in 1..511 and not the drop port")
        if any(p.number == t.cpu_port for p in ports):
            raise UsageError(f"--cpu-port {t.cpu_port} is also an -i port")
    if a.device_id < 0:
        raise UsageError("--device-id must be >= 0")
    host, sep, port = t.grpc_server_addr.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--grpc-server-addr '{t.grpc_server_addr}' is not HOST:PORT")
    prog = Path(a.program) if a.program else None
    if prog is not None and not prog.is_file():
        raise UsageError(f"program file '{prog}' not found")
    pcap = Path(a.pcap) if a.pcap is not None else None
    if pcap is not None and not pcap.is_dir():
        raise UsageError(f"--pcap directory '{pcap}' does not exist")
    depths = tuple(_queue_setting(x, "queue-depth") for x in t.queue_depth)
    rates = tuple(_queue_setting(x, "queue-rate") for x in t.queue_rate)
    try:
        probe = Device()
        for port, n in depths:
            probe.set_queue_depth(n, port)
        for port, n in rates:
            probe.set_queue_rate(n, port)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return Options(a.device_id, ports, pcap, a.log_console,
                   Path(a.log_file) if a.log_file else None, a.log_level, prog,
                   t.grpc_server_addr, not (t.no_grpc or a.no_grpc), t.cpu_port, t.drop_port, a.seed,
                   depths, rates, _tls(t))


def _logger(opts: Options) -> logging.Logger | None:
    if not opts.log_console and opts.log_file is None:
        return None                       # logging is off by default: it costs speed
    logging.addLevelName(5, "TRACE")
    log = logging.getLogger("netsum.switch")
    log.setLevel(LEVELS[opts.log_level])
    fmt = logging.Formatter("[%(asctime)s] [%(levelname)s] %(message)s")
    if opts.log_console:
        h: logging.Handler = logging.StreamHandler(sys.stdout)
        h.setFormatter(fmt)
        log.addHandler(h)
    if opts.log_file is not None:
        fh = logging.FileHandler(opts.log_file)
        fh.setFormatter(fmt)
        log.addHandler(fh)
    return log


def run(opts: Options) -> int:
    log = _logger(opts)
    dev = Device(device_id=opts.device_id, drop_port=opts.drop_port, cpu_port=opts.cpu_port,
                 seed=opts.seed)
    if log is not None:
        dev.set_logger(log)
    for port, n in opts.queue_depths:
        dev.set_queue_depth(n, port)
    for port, n in opts.queue_rates:
        dev.set_queue_rate(n, port)
    if opts.program is not None:
        try:
            size = opts.program.stat().st_size
            if size > MAX_CONFIG_BYTES:   # before reading: json holds it all in memory
                raise ConfigError(f"{size} bytes is more than the {MAX_CONFIG_BYTES} accepted")
            dev.install(Device.build_pipeline(opts.program.read_bytes()))
        except ConfigError as e:
            print(f"{PROG}: error: {opts.program}: {e.message}", file=sys.stderr)
            return 1
        except OSError as e:
            print(f"{PROG}: error: {opts.program}: {e.strerror or e}", file=sys.stderr)
            return 1
    ports = PortSet(list(opts.ports), dev, opts.pcap, log)
    server: Any = None
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            ports.open()
        except OSError as e:
            print(f"{PROG}: error: {e.strerror or e}", file=sys.stderr)
            return 1
        grpc_note = "P4Runtime off"
        if opts.grpc:
            try:
                from netsum.switch.p4rt.server import P4RuntimeServer
            except ImportError as e:
                print(f"{PROG}: error: P4Runtime server unavailable ({e}); use --no-grpc",
                      file=sys.stderr)
                return 1
            try:
                server = P4RuntimeServer(dev, address=opts.grpc_addr, tls=opts.tls)
                server.start()
            except Exception as e:         # bind failures and the like: one line, exit 1
                print(f"{PROG}: error: cannot start P4Runtime server on {opts.grpc_addr}: {e}",
                      file=sys.stderr)
                server = None
                return 1
            host = opts.grpc_addr.rpartition(":")[0]
            grpc_note = f"P4Runtime on {host}:{getattr(server, 'port', '?')}"
            if opts.tls is not None:
                grpc_note += " (TLS)"
        desc = ports.describe() or "no ports"
        print(f"{PROG}: ready: device {opts.device_id}; {desc}; {grpc_note}", flush=True)
        told = False

        def should_stop() -> bool:
            # The first internal error goes to stderr once, as soon as the loop sees it: a run
            # that fails on internal_errors can then say what the exception was.
            nonlocal told
            if not told and dev.first_error is not None:
                told = True
                print(f"{PROG}: internal error (the packet was dropped; later ones are only "
                      f"counted in internal_errors): {dev.first_error}", file=sys.stderr,
                      flush=True)
            return stop
        ports.run(should_stop)
    finally:
        if server is not None:
            server.stop()
        ports.close()
        for s, h in old.items():
            signal.signal(s, h)
    stats = " ".join(f"{k}={v}" for k, v in dev.stats.as_dict().items() if v)
    print(f"{PROG}: stopped: {stats or 'no packets'}", flush=True)
    if log is not None:
        log.info("stats: %s", dev.stats.as_dict())
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        return run(opts)
    except KeyboardInterrupt:
        return 130
