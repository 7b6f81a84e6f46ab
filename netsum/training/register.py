"""A training job's registration with the switch, from the launcher's environment (torch-free).

torchrun (or any launcher) gives every rank RANK, WORLD_SIZE, MASTER_ADDR; the topology file
(NETSUM_TOPOLOGY, docs/controller.md) names the switches and hosts.  Each rank finds its host
in the file, the ranks exchange host names through a rendezvous (torch's store or the gloo
group), and rank 0 -- the only rank that talks P4Runtime -- creates one netsum job per lane
with the ranks' hosts as members, in rank order, each with its share of the slot window.  The
job ids and slot counts go back to every rank, which then opens its transport:

* NETSUM_FRAMES=HOST:PORT: the unprivileged mode, whole frames over UDP to that embedded
  switch port (the launcher knows it from the switch's ready line), sent from
  NETSUM_FRAMES_BIND=HOST:PORT, the port's fixed peer (`netsum-switch -i N@udp:PORT_ADDR=PEER`:
  the switch takes datagrams from PEER only);
* NETSUM_NETNS=NAME: kernel UDP from inside that network namespace (see `in_netns`);
* otherwise kernel UDP from the host's address and port in the file to the switch's service
  address (network namespaces, Mininet hosts, separate machines against a real switch).

Values per packet: NETSUM_K (default 256; `netsum train/launch --k` set it with the switch's
build).  Every rank sends its K with its host; rank 0 refuses ranks that disagree and a switch
whose pipeline was built for another K (`switch_k`: its P4Info's value registers), on every
rank, before any job is written.

A rank's host: NETSUM_HOST if set; else the host whose IPv4 address is one of this machine's
(one rank per host, e.g. Mininet or separate machines); else the RANK-th host of the file.
NETSUM_HOST, NETSUM_FRAMES, NETSUM_FRAMES_BIND and NETSUM_NETNS may be comma-separated lists,
indexed by LOCAL_RANK (`per_rank`): one torchrun command for all ranks of a machine.
No table entry is written by hand, and a failure at rank 0 reaches every rank as its message.

`join` (what the hook and the backend call) opens each rank's transport *before* the
rendezvous: binding its host's address is the rank's claim on that host, and rank 0 then
reclaims the jobs of runs that died (netsum.controller.leases: an owner gone from this machine,
an expired lease, or a member host now held by this run) before creating the new run's jobs,
which carry a lease of their own that rank 0 renews (a Heartbeat) until `unregister` releases
them.  So a crashed run's leftovers never stop the next run from starting.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from netsum.controller.errors import AllocationError, ControllerError
from netsum.controller.fabric import Controller
from netsum.controller.program import built_k
from netsum.controller.leases import Heartbeat, Lease, create_leased, lease_of, reclaim_dead, release
from netsum.controller.topology import Host, JobSpec, Topology, load_topology
from netsum.training.lanes import LaneSpec
from netsum.training.ledger import log
from netsum.wire import K_HARDWARE_MAX, K_SUPPORTED
from netsum.workers import K_DEFAULT, UDP_PORT, FrameTransport, JobConfig, UdpTransport
from netsum.workers.errors import TransportError
from netsum.workers.transport import Transport, parse_hostport
from netsum.workers.wire import Endpoint

__all__ = ["RegistrationError", "TrainingJob", "Rendezvous", "StoreRendezvous", "env_int",
           "env_k", "host_for_rank", "per_rank", "register", "join", "unregister", "open_transport", "in_netns",
           "MAX_JOB_ID"]

MAX_JOB_ID = 255   # the program's per-job counters have 256 cells (NETSUM_MAX_JOBS)
_CLONE_NEWNET = 0x40000000


class RegistrationError(RuntimeError):
    """The job could not be registered; str() is one line naming the cause."""


class Rendezvous(Protocol):
    """How ranks exchange short strings: everyone's to rank 0, then rank 0's to everyone."""

    def gather(self, value: str) -> list[str] | None: ...    # list on rank 0, None elsewhere

    def broadcast(self, value: str | None) -> str: ...        # rank 0 gives, all return it


class _Store(Protocol):
    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...


class StoreRendezvous:
    """Rendezvous over a key-value store whose get() waits for the key (torch.distributed's
    TCPStore/PrefixStore).  Keys carry `tag`, so one store can hold several registrations."""

    def __init__(self, store: _Store, rank: int, world: int, tag: str = "netsum") -> None:
        self.store, self.rank, self.world, self.tag = store, rank, world, tag

    def gather(self, value: str) -> list[str] | None:
        self.store.set(f"{self.tag}/gather/{self.rank}", value)
        if self.rank != 0:
            return None
        return [bytes(self.store.get(f"{self.tag}/gather/{r}")).decode()
                for r in range(self.world)]

    def broadcast(self, value: str | None) -> str:
        if self.rank == 0:
            self.store.set(f"{self.tag}/bcast", value or "")
        return bytes(self.store.get(f"{self.tag}/bcast")).decode()


@dataclass(frozen=True, slots=True)
class TrainingJob:
    """What every rank of one training job agrees on after registration."""
    rank: int
    world_size: int
    hosts: tuple[str, ...]        # per rank
    job_ids: tuple[int, ...]      # one netsum job per lane
    slots_per_lane: int
    k: int
    topology: str                 # path of the topology file
    run: str = ""                 # the lease's run id (netsum.controller.leases)
    #: rank 0's renewal of the jobs' lease (None on the other ranks); stopped by unregister
    heartbeat: Heartbeat | None = field(default=None, compare=False, repr=False)

    def lanes(self) -> tuple[LaneSpec, ...]:
        return tuple(LaneSpec(JobConfig(j, self.world_size, self.slots_per_lane, self.k))
                     for j in self.job_ids)

    def to_json(self) -> str:
        return json.dumps({"hosts": self.hosts, "job_ids": self.job_ids,
                           "slots_per_lane": self.slots_per_lane, "k": self.k})


def env_int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None or text == "":
        if default is None:
            raise RegistrationError(f"{name} is not set (launch with torchrun, or set RANK, "
                                    "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)")
        return default
    try:
        return int(text)
    except ValueError:
        raise RegistrationError(f"{name}={text!r} is not an integer") from None


def _local_ipv4() -> set[int]:
    """This machine's IPv4 addresses (best effort: those the resolver and the UDP stack see)."""
    out = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            out.add(int.from_bytes(socket.inet_aton(str(info[4][0])), "big"))
    except OSError:
        pass
    try:
        import fcntl
        import struct
        names = [n for _, n in socket.if_nameindex()]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for name in names:
                try:
                    got = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                      struct.pack("256s", name.encode()[:15]))
                except OSError:
                    continue
                out.add(int.from_bytes(got[20:24], "big"))
    except OSError:
        pass
    return out


def per_rank(env: Mapping[str, str], name: str) -> str | None:
    """`name`'s value for this process: a comma-separated list is indexed by LOCAL_RANK, so
    one `torchrun --standalone --nproc-per-node N` command can give each of its N ranks its
    own host and switch port (torchrun cannot vary a variable per rank)."""
    value = env.get(name)
    if not value or "," not in value:
        return value
    items = [v.strip() for v in value.split(",")]
    local = env_int(env, "LOCAL_RANK", env_int(env, "RANK", 0))
    if not 0 <= local < len(items):
        raise RegistrationError(f"{name} lists {len(items)} values; LOCAL_RANK {local} has "
                                "none")
    return items[local]


def host_for_rank(topo: Topology, rank: int, env: Mapping[str, str]) -> Host:
    """This rank's host (see the module docstring for the order of the rules)."""
    named = per_rank(env, "NETSUM_HOST")
    if named:
        try:
            return topo.host(named)
        except Exception:  # noqa: BLE001 - the topology's own lookup error names the hosts
            raise RegistrationError(f"NETSUM_HOST={named!r} is not a host of {topo.source} "
                                    f"(hosts: {', '.join(h.name for h in topo.hosts)})") from None
    if "NETSUM_FRAMES" not in env:
        mine = _local_ipv4()
        local = [h for h in topo.hosts if h.ipv4 in mine]
        if len(local) == 1:
            return local[0]
    if not 0 <= rank < len(topo.hosts):
        raise RegistrationError(f"rank {rank} has no host: {topo.source} lists "
                                f"{len(topo.hosts)} (set NETSUM_HOST)")
    return topo.hosts[rank]


def _free_job_ids(ctl: Controller, n: int) -> list[int]:
    used = set(ctl.jobs)
    free = [j for j in range(1, MAX_JOB_ID + 1) if j not in used][:n]
    if len(free) < n:
        raise RegistrationError(f"the switch holds {len(used)} jobs; {n} more do not fit in "
                                f"job ids 1..{MAX_JOB_ID}")
    return free


def _create(topo: Topology, hosts: list[str], lanes: int, slots: int, held: set[str],
            run: str, k: int = K_DEFAULT) -> tuple[list[int], list[str], Heartbeat]:
    """Check that every switch's pipeline was built for `k`, reclaim dead runs' jobs, then
    create this run's jobs with its lease (one transaction per job: no crash leaves a job
    without it): the job ids, one line per job reclaimed, and the started renewal of the
    lease."""
    lease = Lease.new(run, info={"hosts": hosts})
    with Controller(topo) as ctl:
        ctl.connect()
        ctl.adopt()
        for sw in topo.switches:
            built = built_k(ctl.schema(sw.name).registers.by_name)
            if built is not None and built != k:
                beyond = " (beyond Tofino-class hardware)" if built > K_HARDWARE_MAX else ""
                raise RegistrationError(
                    f"switch {sw.name} runs netsum.p4 built for K={built}{beyond}; the ranks "
                    f"send K={k} values per packet (NETSUM_K={k}): start the switch for "
                    f"K={k} (netsum launch/train --k {k}) or set NETSUM_K={built}")
        reclaimed = [r.line() for r in reclaim_dead(ctl, held=held)]
        specs = [JobSpec(job_id, tuple(hosts), slots) for job_id in _free_job_ids(ctl, lanes)]
        try:
            jobs = create_leased(ctl, specs, lease)
        except AllocationError as exc:
            raise AllocationError(f"{exc} (jobs on the switch: {_jobs_line(ctl)}; a dead "
                                  "run's leased jobs are reclaimed when a run registers; "
                                  "others: netsum-ctl job delete ID)") from None
    return [j.spec.id for j in jobs], reclaimed, Heartbeat(topo, jobs, lease).start()


def _jobs_line(ctl: Controller) -> str:
    parts = []
    for job_id, job in sorted(ctl.jobs.items()):
        held = lease_of(job)
        who = (f"run {held.run} of pid {held.owner.pid} on {held.owner.host}" if held
               else "no lease")
        parts.append(f"{job_id} ({', '.join(job.spec.workers)}; {who})")
    return "; ".join(parts) or "none"


Claim = Callable[[Topology, Host, int], Transport]   # topology, host, K


def register(rendezvous: Rendezvous, rank: int, world: int, topology: str | Path,
             env: Mapping[str, str] | None = None, lanes: int = 4, slots: int = 256,
             k: int | None = None, claim: Claim | None = None) -> TrainingJob:
    """Register the training job (rank 0 writes the switch); every rank calls it.  `slots` is
    the job's whole slot window, shared equally by `lanes`; `k` (default NETSUM_K, else 256)
    must be every rank's and the switch's.  With `claim`, each rank first
    opens its transport to its host (`join`); the hosts so held let rank 0 reclaim dead runs'
    jobs on them."""
    return _register(rendezvous, rank, world, topology, env, lanes, slots, k, claim)[0]


def join(rendezvous: Rendezvous, rank: int, world: int, topology: str | Path,
         env: Mapping[str, str] | None = None, lanes: int = 4, slots: int = 256,
         k: int | None = None) -> tuple[TrainingJob, Transport]:
    """Open this rank's transport (its claim on its host), then register: the job and the
    transport, ready for a LaneEngine."""
    env = os.environ if env is None else env

    def claim(topo: Topology, host: Host, k: int) -> Transport:
        return _open(topo, host, env, k)

    job, transport = _register(rendezvous, rank, world, topology, env, lanes, slots, k, claim)
    assert transport is not None
    return job, transport


def _register(rendezvous: Rendezvous, rank: int, world: int, topology: str | Path,
              env: Mapping[str, str] | None, lanes: int, slots: int, k: int | None,
              claim: Claim | None) -> tuple[TrainingJob, Transport | None]:
    env = os.environ if env is None else env
    if not 1 <= lanes <= 16 or slots < lanes:
        raise RegistrationError(f"need 1..16 lanes and at least one slot each, got lanes={lanes} "
                                f"slots={slots}")
    topo_path = str(topology)
    error = ""
    transport: Transport | None = None
    me = ""
    chosen = K_DEFAULT
    try:
        chosen = _k(k, env)
        topo = load_topology(topo_path)
        host = host_for_rank(topo, rank, env)
        me = host.name
        if claim is not None:
            transport = claim(topo, host, chosen)
    except TransportError as exc:
        error = (f"host {me}'s address is in use -- is a rank of another run on {me} still "
                 f"running? ({exc})")
    except (ControllerError, RegistrationError) as exc:
        error = str(exc)
    try:
        return _agree(rendezvous, rank, world, topo_path, me, error, transport is not None,
                      lanes, slots, chosen), transport
    except BaseException:
        if transport is not None:
            transport.close()
        raise


def _agree(rendezvous: Rendezvous, rank: int, world: int, topo_path: str, me: str, error: str,
           held: bool, lanes: int, slots: int, k: int) -> TrainingJob:
    """The rendezvous: every rank's host to rank 0, rank 0's answer (or error) to all."""
    hosts = rendezvous.gather(json.dumps({"host": me, "error": error, "held": held, "k": k}))
    reply: str | None = None
    heartbeat: Heartbeat | None = None
    if rank == 0:
        assert hosts is not None
        got = [json.loads(h) for h in hosts]
        problems = [f"rank {r}: {g['error']}" for r, g in enumerate(got) if g["error"]]
        names = [g["host"] for g in got]
        dup = sorted({n for n in names if n and names.count(n) > 1})
        if dup:
            problems.append(f"ranks share hosts {dup} (one rank per host: set NETSUM_HOST)")
        ks = [g.get("k", k) for g in got]
        if len(set(ks)) > 1:
            problems.append("ranks disagree on values per packet (NETSUM_K): "
                            + ", ".join(f"rank {r} K={v}" for r, v in enumerate(ks)))
        if not problems:
            run = secrets.token_hex(4)
            try:
                ids, reclaimed, heartbeat = _create(
                    load_topology(topo_path), names, lanes, slots // lanes,
                    {g["host"] for g in got if g.get("held")}, run, k)
                for line in reclaimed:
                    log.warning("netsum: %s", line)
                reply = json.dumps({"hosts": names, "job_ids": ids, "run": run,
                                    "slots_per_lane": slots // lanes, "k": k})
            except ControllerError as exc:
                problems.append(f"controller: {exc}")
            except RegistrationError as exc:     # K, or no free job id: every rank hears
                problems.append(str(exc))
        if problems:
            reply = json.dumps({"error": "; ".join(problems)})
    doc = json.loads(rendezvous.broadcast(reply))
    if "error" in doc:
        raise RegistrationError(f"netsum job registration failed: {doc['error']}")
    return TrainingJob(rank, world, tuple(doc["hosts"]), tuple(doc["job_ids"]),
                       int(doc["slots_per_lane"]), int(doc["k"]), topo_path, str(doc["run"]),
                       heartbeat)


def unregister(job: TrainingJob) -> None:
    """Stop renewing the run's lease and delete its netsum jobs from the switch (rank 0, after
    every rank is done): those that still carry this run's lease (a new run may have reclaimed
    them and reused the ids once this run's ranks let go of their hosts)."""
    if job.heartbeat is not None:
        job.heartbeat.stop()
    release(load_topology(job.topology), job.job_ids, job.run)


def env_k(env: Mapping[str, str]) -> int:
    """Values per packet from NETSUM_K (default K_DEFAULT, 256): one of K_SUPPORTED, and the
    K the switch's netsum.p4 was built for (rank 0 checks it at registration).  K above
    K_HARDWARE_MAX (256) is an emulation lever beyond what a Tofino-class switch holds per
    packet (docs/protocol.md, "K beyond 256")."""
    k = env_int(env, "NETSUM_K", K_DEFAULT)
    if k not in K_SUPPORTED:
        raise RegistrationError(f"NETSUM_K={k}: values per packet must be one of "
                                f"{', '.join(map(str, K_SUPPORTED))}")
    return k


def _k(k: int | None, env: Mapping[str, str]) -> int:
    """`k` as given, else NETSUM_K's; one of K_SUPPORTED."""
    if k is None:
        return env_k(env)
    if k not in K_SUPPORTED:
        raise RegistrationError(f"k={k}: values per packet must be one of "
                                f"{', '.join(map(str, K_SUPPORTED))}")
    return k


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body with this thread in network namespace `name` (an `ip netns` name or a path
    such as /proc/PID/ns/net): a socket made inside keeps that namespace, so a rank can live in
    the root namespace (gloo, the store and P4Runtime on loopback) while its netsum traffic
    leaves from its host's namespace through the veth to the switch.  Needs CAP_SYS_ADMIN."""
    path = name if "/" in name else f"/var/run/netns/{name}"
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        home = open("/proc/thread-self/ns/net")
        target = open(path)
    except OSError as exc:
        raise RegistrationError(f"NETSUM_NETNS={name!r}: {exc.strerror}: {path}") from None
    with home, target:
        if libc.setns(target.fileno(), _CLONE_NEWNET) != 0:
            raise RegistrationError(f"NETSUM_NETNS={name!r}: setns failed: "
                                    f"{os.strerror(ctypes.get_errno())} (needs root)")
        try:
            yield
        finally:
            if libc.setns(home.fileno(), _CLONE_NEWNET) != 0:
                raise RegistrationError("cannot return to the original network namespace")


def open_transport(job: TrainingJob, env: Mapping[str, str] | None = None) -> Transport:
    """This rank's transport (see the module docstring)."""
    env = os.environ if env is None else env
    topo = load_topology(job.topology)
    return _open(topo, topo.host(job.hosts[job.rank]), env, job.k)


def _open(topo: Topology, host: Host, env: Mapping[str, str], k: int) -> Transport:
    sw = topo.switch(host.switch)
    ip = socket.inet_ntoa(host.ipv4.to_bytes(4, "big"))
    service_ip = socket.inet_ntoa(sw.service.ipv4.to_bytes(4, "big"))
    netns = per_rank(env, "NETSUM_NETNS")
    if netns:
        with in_netns(netns):
            return UdpTransport((service_ip, UDP_PORT), bind=(ip, host.udp_port), k=k)
    frames = per_rank(env, "NETSUM_FRAMES")
    if frames:
        try:
            port = parse_hostport(frames)
        except ValueError as exc:
            raise RegistrationError(f"NETSUM_FRAMES: {exc}") from None
        try:
            bind = parse_hostport(per_rank(env, "NETSUM_FRAMES_BIND") or "127.0.0.1:0")
        except ValueError as exc:
            raise RegistrationError(f"NETSUM_FRAMES_BIND: {exc}") from None
        local = Endpoint.parse(host.mac.to_bytes(6, "big"), ip, host.udp_port)
        service = Endpoint.parse(sw.service.mac.to_bytes(6, "big"), service_ip, UDP_PORT)
        return FrameTransport(port, local, service, bind, k=k)
    return UdpTransport((service_ip, UDP_PORT), bind=(ip, host.udp_port), k=k)
