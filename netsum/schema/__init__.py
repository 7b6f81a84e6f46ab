"""One P4Info model shared by the P4Runtime client (`netsum.p4rt`) and the switch's server.

A leaf package: it imports only the standard library, `netsum.match` and p4runtime's P4Info
protobuf module, never the client or the switch (so the client can use it without importing
the switch).  `model` holds the frozen objects (tables, match fields, actions, resources;
`MatchKind` comes from the leaf `netsum.match`), `index` the lookups by id, name, alias or
suffix and the P4Info file loader.  The client's lookups, with its own errors, are
`netsum.p4rt.schema`.
"""
from netsum.schema.index import (NameIndex, P4InfoError, P4Schema, UnknownId, UnknownName,
                                 by_suffix, load_p4info, parse_p4info, suggest)
from netsum.schema.model import (UNITS, ActionInfo, MatchField, MatchKind, PacketMetadataInfo,
                                 Param, ResourceInfo, TableInfo, ValueSetInfo)

__all__ = ["P4Schema", "NameIndex", "UnknownId", "UnknownName", "P4InfoError", "load_p4info",
           "parse_p4info", "suggest", "by_suffix", "MatchKind", "MatchField", "Param", "ActionInfo",
           "TableInfo", "ResourceInfo", "PacketMetadataInfo", "ValueSetInfo", "UNITS"]
