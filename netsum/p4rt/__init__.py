"""netsum's P4Runtime client library: the one client the controller, the STF runner and the
tests use (the switch's P4Runtime *server* is `netsum.switch.p4rt`).

A flat package, one concern per module, after finsy's model:

- `schema`: the P4Info lookups (over the shared `netsum.schema` model); misses suggest the
  nearest name;
- `values`: literals ↔ ints ↔ canonical byte strings (spec §8.4, §9.1.1); the match values are
  `netsum.match`'s;
- `entities` (table entries, `update`), `pre` (multicast groups, clone sessions), `cells`
  (counters, meters, registers): frozen dataclasses whose `encode(schema)` and
  `decode(msg, schema)` take the schema as an argument, never a global;
- `client`: `SwitchClient`, the channel, stream, arbitration and RPCs;
- `errors`: the library's errors, the one translation of gRPC errors into them and the one
  decoder of a failed Write's per-update statuses.

It knows nothing of aggregation: `netsum.controller` (fabric, jobs, topology) is built on top.
"""
from netsum.p4rt.cells import (CounterCell, DirectCounterCell, MeterCell, RegisterCell,
                               counter_wildcard, register_wildcard)
from netsum.p4rt.client import Endpoint, Stream, SwitchClient
from netsum.p4rt.entities import (DELETE, INSERT, MODIFY, Entity, TableEntry, parse_table_entry,
                                  table_wildcard, update)
from netsum.p4rt.errors import (ClientError, LiteralError, NotPrimary, P4RuntimeError,
                                PipelineMissing, SchemaLookupError, SwitchUnreachable,
                                UpdateStatus, decode_batch)
from netsum.p4rt.pre import CloneSession, MulticastGroup, groups_wildcard
from netsum.p4rt.schema import Schema, load_p4info

__all__ = [
    "Schema", "load_p4info",
    "TableEntry", "MulticastGroup", "CloneSession", "CounterCell", "DirectCounterCell",
    "MeterCell", "RegisterCell", "Entity", "update", "INSERT", "MODIFY", "DELETE",
    "table_wildcard", "groups_wildcard", "counter_wildcard", "register_wildcard",
    "parse_table_entry",
    "Endpoint", "Stream", "SwitchClient",
    "ClientError", "SchemaLookupError", "LiteralError", "SwitchUnreachable", "NotPrimary",
    "PipelineMissing", "P4RuntimeError", "UpdateStatus", "decode_batch",
]
