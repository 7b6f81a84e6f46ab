"""STF conformance runner, a tool on top of netsum (not part of the emulator): p4c's
behavioural test files (`*.stf`) played on netsum-switch over P4Runtime with frames on real
sockets, and the sweep over p4c's bmv2 test programs (`netsum-stf --help`).

`syntax` parses STF, `expect` compares frames, `names` spells STF names as P4Info names,
`writes` turns commands into the client library's entities (`netsum.p4rt`), `target` runs the
switch and talks to it through the library's client, `run` plays one test, `sweep` runs a
corpus and reports.
"""
from netsum.tools.stf.run import Outcome, Verdict, run_commands, run_test
from netsum.tools.stf.syntax import StfError, parse_stf, parse_stf_file

__all__ = ["Outcome", "Verdict", "run_commands", "run_test", "StfError", "parse_stf",
           "parse_stf_file"]
