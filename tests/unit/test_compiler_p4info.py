"""P4Info details beyond the fixtures: controller headers, @id/@name, ambiguous aliases,
action scopes, default-action arguments, const defaults, meters and registers."""
from __future__ import annotations

from pathlib import Path

from p4.config.v1 import p4info_pb2

from netsum import p4c as compiler
from netsum.p4c.ids import Prefix, assign_ids, jenkins_oaat
from netsum.p4c.diagnostics import Diagnostics
from netsum.p4c.p4info import aliases

ROUTER = Path(__file__).resolve().parents[2] / "tests" / "p4programs" / "basic_router.p4"


def router(edit: dict[str, str]) -> p4info_pb2.P4Info:
    src = ROUTER.read_text()
    for old, new in edit.items():
        assert old in src
        src = src.replace(old, new)
    return compiler.compile_source(src, "r.p4").p4info


def test_controller_headers_hash_the_type_name() -> None:
    info = router({"struct metadata { }": '@controller_header("packet_out")\n'
                   "header packet_out_header_t { bit<9> egress_port; bit<7> _pad; }\n"
                   "struct metadata { }",
                   "    ipv4_t     ipv4;\n}": "    ipv4_t     ipv4;\n"
                   "    packet_out_header_t po;\n}"})
    (cpm,) = info.controller_packet_metadata
    assert cpm.preamble.id == 76689799 and cpm.preamble.name == "packet_out"
    assert [(m.id, m.name, m.bitwidth) for m in cpm.metadata] == [(1, "egress_port", 9),
                                                                  (2, "_pad", 7)]


def test_id_and_name_annotations_and_scopes() -> None:
    info = router({
        "    table ipv4_lpm {": '    @id(0x02000777) @name("routes") table ipv4_lpm {',
        "    action drop() {": '    @name(".global_drop") action drop() {',
        "            NoAction;\n": "            @defaultonly NoAction;\n",
        "default_action = drop();": "const default_action = ipv4_forward(0xAABB, 3);",
    })
    (t,) = info.tables
    assert (t.preamble.id, t.preamble.name, t.preamble.alias) == (0x02000777, "MyIngress.routes",
                                                                   "routes")
    names = {a.preamble.name for a in info.actions}
    assert "global_drop" in names
    scopes = {r.id: r.scope for r in t.action_refs}
    noaction = (Prefix.ACTION << 24) | (jenkins_oaat(b"NoAction") & 0xFFFFFF)
    assert scopes[noaction] == p4info_pb2.ActionRef.DEFAULT_ONLY
    fwd = next(a for a in info.actions if a.preamble.name == "MyIngress.ipv4_forward")
    assert t.const_default_action_id == fwd.preamble.id
    args = [(a.param_id, a.value) for a in t.initial_default_action.arguments]
    assert args == [(1, bytes.fromhex("00000000aabb")), (2, b"\x00\x03")]


def test_aliases_are_shortest_unique_suffixes() -> None:
    got = aliases(["ingress._drop", "egress._drop", "ingress.fwd", "NoAction", "a.b.c", "x.b.c"])
    assert got == {"ingress._drop": "ingress._drop", "egress._drop": "egress._drop",
                   "ingress.fwd": "fwd", "NoAction": "NoAction", "a.b.c": "a.b.c",
                   "x.b.c": "x.b.c"}


def test_collisions_probe_upward_in_sorted_order() -> None:
    taken = {(Prefix.ACTION << 24) | (jenkins_oaat(b"b") & 0xFFFFFF)}
    ids = assign_ids(Prefix.ACTION, [("b", None), ("a", None)], Diagnostics(), taken)
    assert ids["b"] == ((Prefix.ACTION << 24) | (jenkins_oaat(b"b") & 0xFFFFFF)) + 1
    assert ids["a"] == (Prefix.ACTION << 24) | (jenkins_oaat(b"a") & 0xFFFFFF)


def test_meters_registers_counters() -> None:
    info = compiler.compile_file(Path(__file__).resolve().parents[2] / "tests" / "p4programs"
                                 / "stateful.p4").p4info
    assert [(m.preamble.name, m.spec.unit, m.size) for m in info.meters] == \
        [("StIngress.rate", p4info_pb2.MeterSpec.BYTES, 1024)]
    (dm,) = info.direct_meters
    assert dm.preamble.name == "StIngress.drate" and dm.direct_table_id == info.tables[0].preamble.id
    assert [(r.preamble.name, r.type_spec.bitstring.bit.bitwidth, r.size)
            for r in info.registers] == [("StIngress.totals", 32, 1024),
                                         ("StIngress.maxima", 8, 1024)]
    assert sorted(info.tables[0].direct_resource_ids) == sorted(
        [dm.preamble.id, info.direct_counters[0].preamble.id])
    assert all(r.preamble.id >> 24 == Prefix.REGISTER for r in info.registers)


_MAIN = "V1Switch(MyParser(),"


def test_pkginfo_and_platform_property_fill_pkg_info() -> None:
    # Expected fields as p4c's pkginfo_annotation.p4.p4info.txtpb has them; other annotations
    # on main are listed in pkg_info.annotations (p4c's addAnnotations on the package).
    info = router({_MAIN: '@pkginfo(name = "some_name", organization = "some_org",\n'
                   '  version = "some_version", contact = "some_contact", url = "some_url")\n'
                   "@platform_property(multicast_group_table_size = 10,\n"
                   "  multicast_group_table_total_replicas = 20,\n"
                   "  multicast_group_table_max_replicas_per_entry = 2 * 15)\n"
                   '@my_anno("x")\n' + _MAIN})
    expected = p4info_pb2.PkgInfo(
        name="some_name", version="some_version", arch="v1model", organization="some_org",
        contact="some_contact", url="some_url", annotations=['@my_anno("x")'],
        platform_properties=p4info_pb2.PlatformProperties(
            multicast_group_table_size=10, multicast_group_table_total_replicas=20,
            multicast_group_table_max_replicas_per_entry=30))
    assert info.pkg_info == expected
    assert router({}).pkg_info == p4info_pb2.PkgInfo(arch="v1model")


def test_pkginfo_wrong_values_are_errors_unknown_keys_warnings() -> None:
    try:
        router({_MAIN: "@pkginfo(name = 3)\n" + _MAIN})
    except compiler.CompileError as e:
        assert "'name' key in @pkginfo annotation is not a string" in str(e)
    else:
        raise AssertionError("a numeric @pkginfo name compiled")
    src = ROUTER.read_text().replace(_MAIN, '@pkginfo(colour = "red", name = "n")\n' + _MAIN)
    res = compiler.compile_source(src, "r.p4")
    assert res.p4info.pkg_info.name == "n"
    assert any("unknown key name 'colour'" in w.message for w in res.warnings)


def test_key_annotations_keep_hidden_drop_name_and_docs() -> None:
    # p4c's addAnnotations on a match field leaves out only @name, @id, @brief and
    # @description (graph-annotationless-key.p4.p4info.txtpb lists the key's "@hidden").
    info = router({"hdr.ipv4.dstAddr: lpm;":
                   'hdr.ipv4.dstAddr: lpm @hidden @name("dst") @brief("b") @description("d")'
                   ' @my_anno(1);'})
    (mf,) = info.tables[0].match_fields
    assert (mf.name, list(mf.annotations)) == ("dst", ["@hidden", "@my_anno(1)"])


def test_key_names_use_field_name_annotations() -> None:
    # p4c's TableKeyNames (by hand from frontends/p4/tableKeyNames.cpp; issue298-bmv2 and
    # switch_p4_16 are the samples): a field's @name replaces its name; one starting with
    # "." is global, so what is left of it goes.  BMv2 JSON keys carry the same names.
    src = ROUTER.read_text()
    for old, new in {"struct metadata { }": "struct inner_t { bit<8> v; }\n"
                     'struct metadata { @name("renamed") inner_t local; }',
                     "    ethernet_t ethernet;": '    @name(".eth") ethernet_t ethernet;',
                     "hdr.ipv4.dstAddr: lpm;":
                     "hdr.ipv4.dstAddr: lpm; hdr.ethernet.dstAddr[47:40]: ternary;"
                     " meta.local.v: exact; hdr.ethernet.isValid(): exact;"
                     ' hdr.ethernet.etherType: exact @name("given");'}.items():
        assert old in src
        src = src.replace(old, new)
    res = compiler.compile_source(src, "r.p4")
    expected = ["hdr.ipv4.dstAddr", "eth.dstAddr[47:40]", "meta.renamed.v", "eth.$valid$",
                "given"]
    assert [mf.name for mf in res.p4info.tables[0].match_fields] == expected
    (tj,) = [t for p in res.bmv2_json["pipelines"] for t in p["tables"]
             if t["name"] == "MyIngress.ipv4_lpm"]
    assert [k["name"] for k in tj["key"]] == expected


def _dead_read_program(extra_apply: str) -> compiler.CompileResult:
    src = ROUTER.read_text()
    for old, new in {"struct metadata { }": "typedef register<bit<8>> R;\nstruct metadata { }",
                     "    action drop() {": "    R(8) r;\n    register<bit<8>>(4) plain;\n"
                                            "    bit<8> v;\n    bit<8> w;\n"
                                            "    action drop() {",
                     "            ipv4_lpm.apply();": "            ipv4_lpm.apply();\n"
                     "            r.read(v, 1);\n            plain.read(w, 2);\n"
                     + extra_apply}.items():
        assert old in src
        src = src.replace(old, new)
    return compiler.compile_source(src, "r.p4")


def _register_reads(res: compiler.CompileResult) -> list[str]:
    return [p["parameters"][1]["value"] for a in res.bmv2_json["actions"]
            for p in a["primitives"] if p["op"] == "register_read"]


def test_unused_register_reads_go_and_a_typedef_instance_with_them() -> None:
    # By hand from p4c's front end (issue2735-bmv2 is the sample): SimplifyDefUse deletes a
    # @noSideEffects register.read whose result is never used; RemoveAllUnusedDeclarations
    # then deletes the now unused `R(8) r` (its type is a typedef, not an extern) but keeps
    # `register<bit<8>>(4) plain` (an extern type).
    res = _dead_read_program("")
    assert [r.preamble.name for r in res.p4info.registers] == ["MyIngress.plain"]
    assert [r["name"] for r in res.bmv2_json["register_arrays"]] == ["MyIngress.plain"]
    assert _register_reads(res) == []
    # A result that is used keeps its read and its register.
    used = _dead_read_program("            hdr.ipv4.ttl = v;\n")
    assert [r.preamble.name for r in used.p4info.registers] == ["MyIngress.r",
                                                                 "MyIngress.plain"]
    assert _register_reads(used) == ["MyIngress.r"]
