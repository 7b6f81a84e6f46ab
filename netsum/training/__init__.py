"""PyTorch training through the switch: a `torch.distributed` backend "netsum" implementing
every collective c10d dispatches (netsum.training.backend), a DDP communication hook
(netsum.training.hook), tensors of every float dtype and device to and from the workers
(netsum.training.staging), Inf/NaN carried as gloo does (netsum.training.nonfinite), the
per-run count of what went through the switch and what to gloo (netsum.training.ledger), the
job's registration with the controller and the leases that let a new run reclaim a dead run's
jobs (netsum.training.register, on netsum.controller.leases), the lane engine that keeps several
tensors in flight (netsum.training.lanes), `netsum launch` (netsum.training.launch) and the
digits example's comparison run (netsum.training.compare, `netsum train`).

Only `hook`, `backend`, `staging` and `digits` import torch (the optional `train` extra); the
workers package never does.
"""
from __future__ import annotations
