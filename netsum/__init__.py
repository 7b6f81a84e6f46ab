"""netsum: in-network aggregation emulator (umbrella package: the `netsum` command, shared paths)."""
__version__ = "0.1.0"
