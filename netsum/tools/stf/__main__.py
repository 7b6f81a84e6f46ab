"""`python -m netsum.tools.stf`: the same as `netsum-stf` (netsum.tools.stf.cli)."""
import sys

from netsum.tools.stf.cli import main

sys.exit(main())
