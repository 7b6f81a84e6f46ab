"""STF conformance runner: p4c's behavioural test files (`*.stf`) played on netsum-switch over
P4Runtime with frames on real sockets, and the sweep over p4c's bmv2 test programs.

`syntax` parses STF, `expect` compares frames, `schema` resolves STF names in the P4Info,
`writes` turns commands into P4Runtime updates, `target` runs the switch, `run` plays one test,
`sweep` runs a corpus and reports (`python -m netsum.stf --help`).
"""
from netsum.stf.run import Outcome, Verdict, run_commands, run_test
from netsum.stf.syntax import StfError, parse_stf, parse_stf_file

__all__ = ["Outcome", "Verdict", "run_commands", "run_test", "StfError", "parse_stf",
           "parse_stf_file"]
