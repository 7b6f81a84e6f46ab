"""One P4Info model shared by the controller and the switch's P4Runtime server.

A leaf package: it imports only the standard library, `netsum.match` and p4runtime's P4Info
protobuf module, never the controller or the switch (so the controller can use it without
importing the switch).  `model` holds the frozen objects (tables, match fields, actions,
resources; `MatchKind` comes from the leaf `netsum.match`), `index` the lookups by id, name and
alias and the P4Info file loader.
"""
from netsum.schema.index import (NameIndex, P4InfoError, P4Schema, UnknownId, UnknownName,
                                 load_p4info, parse_p4info, suggest)
from netsum.schema.model import (UNITS, ActionInfo, MatchField, MatchKind, PacketMetadataInfo,
                                 Param, ResourceInfo, TableInfo, ValueSetInfo)

__all__ = ["P4Schema", "NameIndex", "UnknownId", "UnknownName", "P4InfoError", "load_p4info",
           "parse_p4info", "suggest", "MatchKind", "MatchField", "Param", "ActionInfo",
           "TableInfo", "ResourceInfo", "PacketMetadataInfo", "ValueSetInfo", "UNITS"]
