"""netsum's embedded switch: runs BMv2 JSON with simple_switch's v1model semantics.

Layout: `pipeline` (loader, init_<section> steps) over `layout` (field slots), `expressions`,
`primitives`, `actions`, `parser`, `calculations` (code generation); `tables`, `stateful`,
`replication` (control-plane objects); `v1model` (packet life cycle); `device` (the API of
docs/architecture.md); `ports`, `pcap`, `cli` (the `netsum-switch` daemon); `p4rt/` (P4Runtime).
"""
