"""Cluster side: Ray connection, inventory probes, the fleet manager and its journal."""
