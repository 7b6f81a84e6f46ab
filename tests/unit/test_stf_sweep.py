"""The sweep's selection of p4c's test programs and its grouping of failures by cause."""
from __future__ import annotations

from pathlib import Path

from netsum.tools.stf.run import Outcome, Verdict
from netsum.tools.stf.sweep import group_failures, select_programs, summary_table

V1 = "#include <core.p4>\n#include <v1model.p4>\n"


def test_selection_follows_p4cs_test_list(tmp_path: Path) -> None:
    samples, outputs = tmp_path / "p4_16_samples", tmp_path / "p4_16_samples_outputs"
    samples.mkdir()
    outputs.mkdir()

    def prog(name: str, src: str, stf: bool = True, info: bool = True) -> None:
        (samples / f"{name}.p4").write_text(src)
        if stf:
            (samples / f"{name}.stf").write_text("packet 0 00\n")
        if info:
            (outputs / f"{name}.p4.p4info.txtpb").write_text("")

    prog("a-bmv2", V1)
    prog("b-bmv2", V1, stf=False)                     # no STF test
    prog("c-bmv2", V1, info=False)                    # real p4c does not compile it
    prog("d-bmv2", "#include <psa.p4>\n")             # not v1model
    prog("e", V1)                                     # not a bmv2 test program
    prog("f-bmv2", '#include "v1model.p4"\n')
    assert [p.name for p in select_programs(samples)] == ["a-bmv2", "f-bmv2"]
    assert [p.name for p in select_programs(samples, ["f-bmv2"])] == ["f-bmv2"]


def test_failures_grouped_by_cause_largest_first() -> None:
    results = {
        "p1": Outcome(Verdict.PASS),
        "p2": Outcome(Verdict.NOT_COMPILED, "12:3: error: unsupported construct: header_union 'U'"),
        "p3": Outcome(Verdict.NOT_COMPILED, "40:9: error: unsupported construct: header_union 'V'"),
        "p4": Outcome(Verdict.WRONG, "port 0 (stf line 3): frame 0: byte 2 differs"),
        "p5": Outcome(Verdict.REFUSED, "at load: INVALID_ARGUMENT: tables[1] ('t'): no actions"),
    }
    groups = group_failures(results)
    assert groups[0] == (Verdict.NOT_COMPILED,
                         "error: unsupported construct: header_union '…'", ["p2", "p3"])
    assert {(v, tuple(n)) for v, _, n in groups[1:]} == {(Verdict.WRONG, ("p4",)),
                                                         (Verdict.REFUSED, ("p5",))}
    table = summary_table(results, "x")
    assert "| x | 1 (20%) | 1 | 1 | 2 | 0 | 0 | 5 |" in table
