"""Exceptions the policy raises for input it cannot judge.

A refusal is not an exception: `admit` returns a `Decision` with reasons. These are raised
only when the input itself is unusable (a config we cannot read, a GPU kind we do not know).
"""

from __future__ import annotations


class PolicyInputError(ValueError):
    """Input the policy cannot work from; the message is one line naming field and value."""


class InvalidConfig(PolicyInputError):
    """A model config that is malformed: a field missing, of the wrong type or out of range."""


class UnsupportedModel(InvalidConfig):
    """A well-formed config of an architecture or quantization the policy does not know.

    Raised instead of guessing: a wrong guess would admit a model vLLM then refuses.
    """


class UnknownGpu(PolicyInputError):
    """A GPU kind that is neither a built-in profile name nor one of its aliases."""


class InvalidInventory(PolicyInputError):
    """A cluster inventory or admission request that contradicts itself."""


class InvalidRequest(PolicyInputError):
    """An admission request with an out-of-range field (utilization, lengths, layout)."""
