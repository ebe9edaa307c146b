"""What each node of the cluster really has: GPUs, links, cache disk, RAM (probed, then
overridden by the operator where the cluster config says so)."""
