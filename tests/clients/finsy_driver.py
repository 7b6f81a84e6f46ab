"""Drive a P4Runtime server with finsy (an independent client library, in its own virtualenv:
it needs protobuf >= 4, the project pins 3.20 for p4runtime-shell).  Imports nothing of netsum.

    finsy_driver.py ADDRESS DEVICE_ID P4INFO JSON

Steps, each answered with one JSON line on stdout; between steps it waits for a line on stdin
so the caller can send packets through the switch:
  1. load the pipeline (finsy's p4force), insert an L2Ingress.dmac entry forward(2) for
     00:00:00:00:00:05, set L2Egress.replica_rewrite's default to set_vlan(7);
  2. Switch.delete_all() (deletes entries, resets every non-const default with a MODIFY that
     carries no action), then report the entries and replica_rewrite's default.
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import finsy as fy


def say(**obj: object) -> None:
    print(json.dumps(obj), flush=True)


def wait() -> None:
    sys.stdin.readline()


async def entries(sw: fy.Switch) -> list[dict[str, object]]:
    out = []
    async for e in sw.read(fy.P4TableEntry()):
        out.append({"table": e.table_id, "match": e.match_str(sw.p4info),
                    "action": e.action_str(sw.p4info)})
    return out


async def default(sw: fy.Switch, table: str) -> str:
    async for e in sw.read(fy.P4TableEntry(table, is_default_action=True)):
        return e.action_str(sw.p4info)
    return ""


async def main(address: str, device_id: int, p4info: Path, blob: Path) -> None:
    opts = fy.SwitchOptions(p4info=p4info, p4blob=blob, p4force=True, device_id=device_id)
    async with fy.Switch("sw1", address, opts) as sw:
        await sw.write([
            +fy.P4TableEntry("dmac", match=fy.P4TableMatch(**{"hdr.eth.dst": 5}),
                             action=fy.P4TableAction("forward", port=2)),
            ~fy.P4TableEntry("replica_rewrite", action=fy.P4TableAction("set_vlan", vid=7),
                             is_default_action=True),
        ])
        say(step=1, entries=await entries(sw), default=await default(sw, "replica_rewrite"))
        wait()
        await sw.delete_all()
        say(step=2, entries=await entries(sw), default=await default(sw, "replica_rewrite"))
        wait()


if __name__ == "__main__":
    addr, dev, info, js = sys.argv[1:5]
    asyncio.run(main(addr, int(dev), Path(info), Path(js)))
