"""How an engine replica finds its model's weights on the node it was placed on.

The manager stages the weights on every node that may host a replica before it deploys,
but Ray chooses the node, a node may join later, and a node's cache root may differ from
the head's. So the replica asks, on its own node and before vLLM starts, for the local
directory: staging it there first if it is missing. The control plane implements this
port (`cluster/staging/replica_weights.py`); the data plane only calls it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class WeightsLocator(Protocol):
    def local_path(self) -> Path:
        """The verified model directory on this node (staged now if it was missing).
        Blocking: call it off the event loop. Raises with the reason when it cannot."""
