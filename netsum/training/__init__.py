"""PyTorch training through the switch: a DDP communication hook (netsum.training.hook), a
`torch.distributed` backend "netsum" (netsum.training.backend), the training job's
registration with the controller (netsum.training.register), the lane engine that keeps several
buckets in flight (netsum.training.lanes), and the digits example's comparison run
(netsum.training.compare, `netsum train`).

Only `hook`, `backend` and `digits` import torch (the optional `train` extra); the workers
package never does.
"""
from __future__ import annotations
