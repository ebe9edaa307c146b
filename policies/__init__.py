"""Admission policy: pure functions from typed snapshots to decisions.

Nothing in this package imports ray, torch or vllm: it must answer in milliseconds
from a config.json and a cluster inventory, before anything is downloaded.
"""
