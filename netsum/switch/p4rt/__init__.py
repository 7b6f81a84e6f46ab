"""P4Runtime server of the embedded switch, behaving like simple_switch_grpc (PI).

Layers, bottom up: `codec` (byte strings), `schema` (P4Info index), `pipeline_config`
(device config + P4Info checks), `tables` / `entities` (Write/Read per entity kind on a
`context.Context`), `packetio`, `arbitration`, `service` (semantics without gRPC), `server`
(thin gRPC).  See docs/p4runtime.md.
"""
from netsum.switch.p4rt.server import API_VERSION, P4RuntimeServer

__all__ = ["P4RuntimeServer", "API_VERSION"]
