"""`python -m switch`: the netsum-switch daemon."""
from netsum.switch.cli import main

raise SystemExit(main())
