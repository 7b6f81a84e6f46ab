"""finsy's examples/l2_switch learning loop, written with the pip-installed finsy's own API in
the order that example uses it (the example itself is not part of the finsy package, so the
test cannot run it from there).  Runs in .venv-finsy; imports nothing of netsum.

    finsy_learning.py ADDRESS DEVICE_ID P4INFO JSON TTL_NS

The ready handler does what the example's does: `delete_all()` (which deletes the digest
entries too), start the digest and idle-timeout readers, then one write of a DigestEntry
(max_list_size 1, ack_timeout 1 s), the flood multicast group and dmac's default action.  Each
DigestList learns its hosts (smac `known` with idle_timeout_ns = TTL_NS, dmac `forward`) and is
acknowledged; each IdleTimeoutNotification unlearns its hosts (smac and dmac DELETEs).  One
JSON line on stdout per event: {"ready": ...}, {"learned": [[mac, port], ...]},
{"unlearned": [mac, ...]}.  Ends when stdin closes.
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import finsy as fy

MGRP = 0xAB
PORTS = [1, 2, 3]


def say(**obj: object) -> None:
    print(json.dumps(obj), flush=True)


async def main(address: str, device_id: int, p4info: Path, blob: Path, ttl_ns: int) -> None:
    async def ready(switch: fy.Switch) -> None:
        await switch.delete_all()
        switch.create_task(digests(switch))
        switch.create_task(timeouts(switch))
        await switch.write([
            +fy.P4DigestEntry("learn_t", max_list_size=1, ack_timeout_ns=int(1e9)),
            +fy.P4MulticastGroupEntry(MGRP, replicas=PORTS),
            ~fy.P4TableEntry("dmac", action=fy.P4TableAction("flood", group=MGRP),
                             is_default_action=True),
        ])
        read = [e async for e in switch.read(fy.P4DigestEntry("learn_t"))]
        say(ready=True, digest_config=[[e.digest_id, e.max_list_size, e.ack_timeout_ns]
                                       for e in read])

    async def digests(switch: fy.Switch) -> None:
        async for digest in switch.read_digests("learn_t"):
            hosts = [(entry["mac"], entry["port"]) for entry in digest]
            await switch.write(
                [learn(mac, port) for mac, port in hosts], warn_only=True)
            await switch.write([digest.ack()])
            say(learned=hosts, list_id=digest.list_id)

    async def timeouts(switch: fy.Switch) -> None:
        async for timeout in switch.read_idle_timeouts():
            macs = [entry["src"] for entry in timeout]
            await switch.write([unlearn(mac) for mac in macs])
            say(unlearned=macs)

    def learn(mac: int, port: int) -> list[fy.P4Entity]:
        return [
            +fy.P4TableEntry("smac", match=fy.P4TableMatch(**{"hdr.eth.src": mac}),
                             action=fy.P4TableAction("known"), idle_timeout_ns=ttl_ns),
            +fy.P4TableEntry("dmac", match=fy.P4TableMatch(**{"hdr.eth.dst": mac}),
                             action=fy.P4TableAction("forward", port=port)),
        ]

    def unlearn(mac: int) -> list[fy.P4Entity]:
        return [
            -fy.P4TableEntry("smac", match=fy.P4TableMatch(**{"hdr.eth.src": mac})),
            -fy.P4TableEntry("dmac", match=fy.P4TableMatch(**{"hdr.eth.dst": mac})),
        ]

    opts = fy.SwitchOptions(p4info=p4info, p4blob=blob, p4force=True, device_id=device_id,
                            ready_handler=ready)
    switch = fy.Switch("sw1", address, opts)
    task = asyncio.create_task(switch.run())
    # stdin closing is the caller's "stop".
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]),
                     int(sys.argv[5])))
