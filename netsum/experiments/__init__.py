"""Experiment code, in one place: what the Mininet scripts (mininet/) and the benchmarks run.

- `points`: sweep points, the link-rate theory they are compared with, CSV rows (pure);
- `plots`: the experiment PNGs from a sweep's CSV files;
- `telemetry`: interface and P4 counters sampled while a job runs;
- `mnenv`: can Mininet run here (answerable without importing Mininet);
- `mnguard`: the process guard that removes a killed experiment's interfaces;
- `mnswitch`: netsum's switch as a Mininet `Switch` (importing it imports Mininet);
- `testbed`: a Mininet network of workers and switches, built once per sweep network.
"""
