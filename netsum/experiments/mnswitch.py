"""Mininet pieces for netsum: the P4 switch class, topologies from the shared topology file,
host set-up, and the controller hand-off.

Owns:
- `NetsumSwitch(Switch)`: runs `netsum-switch` (or a real `simple_switch_grpc`) in the root
  namespace on the switch's Mininet interfaces (`-i PORT@IFACE`, the Mininet port numbers), with
  P4Runtime on 127.0.0.1 and a per-switch log; `start()` returns once the switch serves
  P4Runtime, `stop()` kills it and then lets Mininet delete the interfaces.
- `TopoFromFile(Topo)`: hosts, switches and links of a `netsum.controller.topology` file, port numbers
  as in the file (docs/controller.md, "Using the same file from Mininet scripts").
- `configure_hosts`: what a Mininet host needs before kernel UDP reaches the switch (offloads
  off, no IPv6 chatter, a host route and a permanent neighbour entry for the service address).
- `with_grpc_addrs` / `start_controller`: the file's topology with the addresses the switches
  really listen on, and a `netsum.controller.fabric.Controller` that has pushed pipeline + forwarding.

Importing this module imports Mininet: check `mnenv.environment_problem()` first.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from mininet.net import Mininet
from mininet.node import Node, Switch
from mininet.topo import Topo

from netsum.experiments import mnguard
from netsum.controller.fabric import Controller, load_program
from netsum.controller.topology import Topology

__all__ = ["NetsumMininetError", "NetsumSwitch", "TopoFromFile", "configure_hosts",
           "with_grpc_addrs", "start_controller", "build_program", "switch_ready_timeout", "ipv4_text",
           "mac_text"]

#: The line netsum-switch prints once its ports and P4Runtime server are up (docs/switch.md).
_READY = re.compile(r"netsum-switch: ready: .*P4Runtime on (\S+)")
switch_ready_timeout = 30.0


def ipv4_text(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def mac_text(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


class NetsumMininetError(Exception):
    """A Mininet run could not be set up.  str() is the one line the user sees."""


def _switch_command() -> list[str]:
    # The venv's console script first: Mininet scripts are often run as root with a PATH that
    # does not include the venv.
    beside = Path(sys.executable).parent / "netsum-switch"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("netsum-switch")
    return [found] if found else [sys.executable, "-m", "netsum.switch"]


def _free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NetsumSwitch(Switch):
    """A Mininet switch running netsum-switch (or simple_switch_grpc) as a user-space process.

    Parameters (Mininet camelCase, passed through `addSwitch(name, **params)`):
      grpcAddr   P4Runtime address; port 0 picks a free port (read back as `grpcAddress`)
      deviceId   P4Runtime device id (`--device-id`; simple_switch_grpc's default is 0)
      json       BMv2 JSON to load at start; None starts empty (`--no-p4`, the controller
                 pushes the pipeline over P4Runtime)
      logDir     where `<name>.log` goes (the switch's stdout and stderr)
      seed       seed of the program's random() (the drop simulator), netsum-switch only
      pcapDir    write per-interface pcaps there
      executable argv prefix of the switch; default netsum-switch.  A path ending in
                 simple_switch_grpc gets its conventions (no ready line: wait for the port)
    """

    def __init__(self, name: str, grpcAddr: str = "127.0.0.1:0", deviceId: int = 0,
                 json: str | None = None, logDir: str = "/tmp/netsum-mininet",
                 seed: int | None = None, pcapDir: str | None = None,
                 executable: list[str] | None = None, **params: Any) -> None:
        # The switch process must see the interfaces Mininet leaves in the root namespace.
        params["inNamespace"] = False
        super().__init__(name, **params)
        self.grpcAddr = grpcAddr
        self.grpcAddress = ""           # the address it really listens on, once started
        self.deviceId = deviceId
        self.json = json
        self.logDir = Path(logDir)
        self.logPath = self.logDir / f"{name}.log"
        self.seed = seed
        self.pcapDir = pcapDir
        self.executable = executable or _switch_command()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def isBmv2(self) -> bool:
        return Path(self.executable[-1]).name == "simple_switch_grpc"

    def dataPorts(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data port, in port order; Mininet's port 0
        on a root-namespace switch is its `lo` control interface."""
        return sorted((port, intf.name) for port, intf in self.intfs.items()
                      if intf.name != "lo")

    def argv(self) -> list[str]:
        addr = self.grpcAddr
        host, _, port = addr.rpartition(":")
        if self.isBmv2 and port == "0":
            # simple_switch_grpc does not report an ephemeral port: choose one here.
            addr = f"{host}:{_free_tcp_port()}"
            self.grpcAddr = addr
        argv = [*self.executable, "--device-id", str(self.deviceId)]
        for port_no, intf in self.dataPorts():
            argv += ["-i", f"{port_no}@{intf}"]
        if self.pcapDir:
            argv += ["--pcap", self.pcapDir]
        if self.seed is not None and not self.isBmv2:
            argv += ["--seed", str(self.seed)]
        argv += [self.json] if self.json else ["--no-p4"]
        return [*argv, "--", "--grpc-server-addr", addr]

    def start(self, controllers: list[Any]) -> None:
        """Launch the switch in the background and return once it serves P4Runtime."""
        del controllers  # P4Runtime clients connect to us; there is no OpenFlow controller
        for _, intf in self.dataPorts():
            # Kernel IPv6 on a switch port would inject router solicitations and neighbour
            # discovery into the data plane; the port is only a cable end for the switch.
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1"],
                           capture_output=True)
            subprocess.run(["ip", "link", "set", intf, "up"], capture_output=True)
        self.logDir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.logPath, "wb")
        argv = self.argv()
        self._log.write(("# " + " ".join(argv) + "\n").encode())
        self._log.flush()
        # Its own session: stop() signals the whole group, and Ctrl-C in a Mininet CLI does
        # not reach it.
        try:
            self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise NetsumMininetError(f"switch {self.name}: cannot run {argv[0]}: "
                                     f"{exc.strerror or exc}") from None
        mnguard.note_pgid(self.process.pid)
        self.grpcAddress = self._waitReady()

    def _waitReady(self) -> str:
        assert self.process is not None
        deadline = time.monotonic() + switch_ready_timeout
        while time.monotonic() < deadline:
            if self.isBmv2:
                host, _, port = self.grpcAddr.rpartition(":")
                with socket.socket() as s:
                    if s.connect_ex((host, int(port))) == 0:
                        return self.grpcAddr
            else:
                m = _READY.search(self.logPath.read_text(errors="replace"))
                if m:
                    return m.group(1).rstrip(";")
            if self.process.poll() is not None:
                raise NetsumMininetError(f"switch {self.name} exited at start (status "
                                         f"{self.process.returncode}): {self.logTail()}")
            time.sleep(0.05)
        raise NetsumMininetError(f"switch {self.name} did not become ready within "
                                 f"{switch_ready_timeout:.0f} s (log: {self.logPath})")

    def logTail(self, lines: int = 3) -> str:
        try:
            text = self.logPath.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, deleteIntfs: bool = True) -> None:
        """Kill the switch process (SIGTERM, then SIGKILL after 3 s), then Mininet's stop."""
        proc, self.process = self.process, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(3.0)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        super().stop(deleteIntfs)


class TopoFromFile(Topo):
    """The topology file's hosts, switches and links as a Mininet topology.

    Every switch gets `grpcAddr`/`deviceId` from the file (or port 0 with `freeGrpc`, so runs
    never collide; `with_grpc_addrs` then tells the controller where they listen).  Host links
    use the host's `eth0` and the file's switch port; switch links use both ends' ports.  `bw`
    (Mb/s) goes on every link, for `TCLink`.  Extra `switchParams` go to every `addSwitch`.
    """

    def build(self, topology: Topology, bw: float | None = None, prefixLen: int = 24,
              freeGrpc: bool = False, **switchParams: Any) -> None:
        link_opts: dict[str, Any] = {} if bw is None else {"bw": bw}
        for index, sw in enumerate(topology.switches):
            # Mininet derives a dpid from digits in the name ("s1"); names like "root" have
            # none, and a dpid means nothing to a P4 switch: number them in file order.
            self.addSwitch(sw.name, dpid=f"{index + 1:x}",
                           grpcAddr="127.0.0.1:0" if freeGrpc else sw.grpc_addr,
                           deviceId=sw.device_id, **switchParams)
        for h in topology.hosts:
            self.addHost(h.name, ip=f"{ipv4_text(h.ipv4)}/{prefixLen}",
                         mac=mac_text(h.mac))
            self.addLink(h.name, h.switch, port1=0, port2=h.port, **link_opts)
        for ln in topology.links:
            self.addLink(ln.a, ln.b, port1=ln.a_port, port2=ln.b_port, **link_opts)


def _must(node: Node, *argv: str) -> None:
    out, err, code = node.pexec(*argv)
    if code != 0:
        raise NetsumMininetError(f"{node.name}: `{' '.join(argv)}` failed: "
                                 f"{(err or out).strip() or f'exit status {code}'}")


def set_link_mtu(net: Mininet, k: int) -> None:
    """Every link at the MTU K's frames need (netsum.rig.link_mtu: the kernel's 1500 up to
    K = 256, jumbo frames beyond: emulation past a Tofino-class switch, as the rig's namespace
    mode gives its veths).  Call after net.build(); TCP between hosts then uses it too."""
    from netsum.rig import link_mtu
    mtu = link_mtu(k)
    if not mtu:
        return
    for link in net.links:
        for intf in (link.intf1, link.intf2):
            _must(intf.node, "ip", "link", "set", "dev", intf.name, "mtu", str(mtu))


def configure_hosts(net: Mininet, topology: Topology) -> None:
    """Prepare every host of the file for kernel UDP through the P4 switch.

    - checksum offloads off: otherwise the host's kernel leaves UDP checksums for a NIC that
      does not exist, and a raw-socket switch forwards them unfinished (bad checksums);
    - IPv6 off: keeps router solicitations and neighbour discovery out of the switch;
    - a /32 route and a permanent neighbour entry for the service address of the host's switch:
      workers send DATA there and nothing answers ARP for it on every switch (in a tree the
      leaves' service addresses sit outside the hosts' subnet).
    """
    for h in topology.hosts:
        node = net.get(h.name)
        intf = node.defaultIntf().name
        _must(node, "ethtool", "-K", intf, "tx", "off", "rx", "off")
        node.pexec("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        svc = topology.switch(h.switch).service
        ip, mac = ipv4_text(svc.ipv4), mac_text(svc.mac)
        _must(node, "ip", "route", "replace", f"{ip}/32", "dev", intf)
        _must(node, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", intf, "nud", "permanent")


def with_grpc_addrs(topology: Topology, net: Mininet) -> Topology:
    """The topology with each switch's `grpc_addr` replaced by where its process listens."""
    switches = []
    for sw in topology.switches:
        node = net.get(sw.name)
        addr = getattr(node, "grpcAddress", "") or sw.grpc_addr
        switches.append(dataclasses.replace(sw, grpc_addr=addr))
    return dataclasses.replace(topology, switches=tuple(switches))


def build_program(k: int, target: str, out_dir: Path) -> tuple[Path, Path, list[str] | None]:
    """(BMv2 JSON, P4Info, switch argv or None for netsum-switch) of netsum.p4 for K=k:
    netsum-p4c's build (cached under build/), or real p4c into `out_dir` for target bmv2."""
    from netsum import build
    from netsum.rig import missing_bmv2_tools
    try:
        if target == "bmv2":
            missing = missing_bmv2_tools()
            if missing:
                raise NetsumMininetError(f"target bmv2 needs real simple_switch_grpc and "
                                         f"p4c-bm2-ss on PATH; missing: {', '.join(missing)}")
            json_path, info_path = build.build_target(build.target_for(k), out_dir,
                                                      build.Backend.P4C)
            return json_path, info_path, [shutil.which("simple_switch_grpc") or ""]
        json_path, info_path = build.ensure_built(k)
        return json_path, info_path, None
    except build.BuildError as exc:
        raise NetsumMininetError(f"P4 build failed: {exc}") from None


def start_controller(topology: Topology, p4info: Path, bmv2_json: Path,
                     rpc_timeout: float | None = None) -> Controller:
    """A controller that has connected to every switch and installed the pipeline and L2
    forwarding (with ARP for the service addresses); the caller creates jobs and closes it.
    `rpc_timeout` replaces the clients' default deadline per P4Runtime call: loading a large
    pipeline (K = 256) on a loaded machine can take longer than it."""
    ctl = Controller(topology, load_program(p4info, bmv2_json))
    if rpc_timeout is not None:
        for client in ctl.clients.values():
            client.timeout = rpc_timeout
    try:
        ctl.connect()
        ctl.push_pipeline()
        ctl.install_forwarding()
    except BaseException:
        ctl.close()
        raise
    return ctl
