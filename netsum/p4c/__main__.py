"""``python -m compiler``: the same as ``netsum-p4c``."""
import sys

from .cli import main

sys.exit(main())
