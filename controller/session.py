"""What every `netsum-ctl` verb starts from: the parsed arguments (`Ctx`), the switch they
name (`--grpc-addr`/`--device-id`/`--election-id`, or `--topo` + `--switch`), a session with it
and its schema, the program to push, and a `Controller` over the whole topology.  Sessions are
context managers: they are closed on every path, errors included.

The controller knows no P4 source: the program comes from `--p4info` + a BMv2 JSON, or from
the `build` callable the entry point hands in (netsum.ctl gives netsum.p4's build).
"""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, TextIO

from netsum.controller import render
from netsum.controller.errors import ControllerError
from netsum.controller.fabric import Controller, Program, load_program
from netsum.controller.topology import Topology, load_topology
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.p4rt.schema import Schema, load_p4info

__all__ = ["Ctx", "ProgramBuild", "ctx_topology", "ctx_endpoint", "open_switch", "ctx_program",
           "open_controller"]

#: K -> (BMv2 JSON path, P4Info path) of the default program; raises ControllerError.
ProgramBuild = Callable[[int], tuple[Path, Path]]


@dataclass(frozen=True, slots=True)
class Ctx:
    args: argparse.Namespace
    out: TextIO
    build: ProgramBuild | None = None

    def emit(self, data: Any, text: str) -> None:
        render.emit(self.out, self.args.json, data, text)


# -- sessions ---------------------------------------------------------------------------------

def ctx_topology(ctx: Ctx) -> Topology | None:
    """The --topo file; an explicit --election-id overrides the file's for every switch (a
    second controller, or a person beside a running one, needs its own)."""
    if not ctx.args.topo:
        return None
    topo = load_topology(ctx.args.topo)
    if ctx.args.election_id_given:
        topo = replace(topo, switches=tuple(replace(s, election_id=ctx.args.election_id)
                                            for s in topo.switches))
    return topo


def ctx_endpoint(ctx: Ctx) -> Endpoint:
    a = ctx.args
    topo = ctx_topology(ctx)
    if topo is not None and not a.grpc_addr_given:
        if a.switch:
            sw = topo.switch(a.switch)
        elif len(topo.switches) == 1:
            sw = topo.switches[0]
        else:
            raise ControllerError(f"{topo.source} has {len(topo.switches)} switches: say which "
                                  f"with --switch ({', '.join(s.name for s in topo.switches)})")
        return Endpoint(sw.grpc_addr, sw.device_id, sw.election_id)
    return Endpoint(a.grpc_addr, a.device_id, a.election_id)


@contextlib.contextmanager
def open_switch(ctx: Ctx) -> Iterator[tuple[SwitchClient, Schema]]:
    client = SwitchClient(ctx_endpoint(ctx), ctx.args.timeout)
    client.connect()
    try:
        got = client.get_pipeline()
        if got is None:
            raise ControllerError(f"switch {client.endpoint} has no forwarding pipeline: "
                                  "push one first (`netsum-ctl pipeline push`)")
        schema = Schema(got[0])
        if ctx.args.p4info:
            given = Schema(load_p4info(ctx.args.p4info))
            # Ids are what travels: a P4Info of another program would address other tables.
            if _ids(given) != _ids(schema):
                raise ControllerError(f"--p4info {ctx.args.p4info} does not describe the "
                                      f"pipeline switch {client.endpoint} runs; leave it out to "
                                      "use the switch's own P4Info")
            schema = given
        yield client, schema
    finally:
        client.close()


def _ids(schema: Schema) -> set[tuple[int, str]]:
    return {(t.id, t.name) for t in schema.tables} | {(a.id, a.name) for a in schema.actions}


def ctx_program(ctx: Ctx) -> Program:
    a = ctx.args
    if a.p4info and getattr(a, "bmv2_json", None):
        return load_program(a.p4info, a.bmv2_json)
    if a.p4info or getattr(a, "bmv2_json", None):
        raise ControllerError("give both --p4info P4INFO and the BMv2 JSON, or neither (then "
                              "the netsum program is built and used)")
    if ctx.build is None:
        raise ControllerError("no program to push: give --p4info P4INFO and the BMv2 JSON")
    json_path, info_path = ctx.build(a.k)
    return load_program(info_path, json_path)


@contextlib.contextmanager
def open_controller(ctx: Ctx, program: Program | None = None,
                adopt: bool = True) -> Iterator[Controller]:
    topo = ctx_topology(ctx)
    if topo is None:
        raise ControllerError(f"`{ctx.args.verb}` needs a topology file: --topo FILE")
    ctl = Controller(topo, program, ctx.args.timeout)
    try:
        ctl.connect()
        if adopt:
            ctl.adopt()
        yield ctl
    finally:
        ctl.close()
