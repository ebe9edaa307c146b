"""Switchyard's shared vocabulary: the types every layer above speaks.

Model sources, deployment configs, model states, the CLI <-> manager operation protocol,
user-input errors and exit codes, and the metric catalogue. Imports nothing of Switchyard's
but `policies/` (tests/unit/test_layers.py enforces it), and no Ray.
"""
