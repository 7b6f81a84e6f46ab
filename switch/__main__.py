"""`python -m switch`: the netsum-switch daemon."""
from switch.cli import main

raise SystemExit(main())
