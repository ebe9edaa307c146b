"""What a miniature is made of: the real config it shrinks, each change and why, its tensors.

A recipe is data, not code that writes files: the writer turns it into a model directory, and
the unit tests read it to check that every difference from the real model is recorded.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.miniature_generator.special_tokens import ExtraToken

MINIATURE_RECORD_KEY = "switchyard_miniature"
"""The config.json key under which a miniature says what it stands for and how it differs."""


class Removed(enum.Enum):
    """Marks a real config field that the miniature drops altogether."""

    FIELD = "removed"


REMOVED = Removed.FIELD


@dataclass(frozen=True)
class ConfigChange:
    """One field of the real config that the miniature sets differently, and why."""

    field: str
    miniature: Any
    """The miniature's value (JSON-serialisable), or REMOVED to drop the field."""
    why: str


@dataclass(frozen=True)
class Deviation:
    """A difference from the real model that is not a field of its language-model config."""

    aspect: str
    real: Any
    miniature: Any
    why: str


class TensorInit(enum.Enum):
    """How a tensor's values are drawn."""

    NORMAL = "normal"
    """Random normal with the recipe's small std: linear and embedding weights."""
    ONES = "ones"
    """RMSNorm scales start at one, as in a freshly initialised model."""
    ZEROS = "zeros"
    """Router correction biases: zero means 'no correction', which is what the CPU router needs."""


class TensorDtype(enum.Enum):
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


@dataclass(frozen=True)
class TensorSpec:
    """One checkpoint tensor, named exactly as the Hugging Face checkpoint names it."""

    name: str
    shape: tuple[int, ...]
    init: TensorInit = TensorInit.NORMAL
    dtype: TensorDtype = TensorDtype.BFLOAT16

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class MiniatureRecipe:
    """Everything needed to write one miniature, independent of the seed."""

    name: str
    stands_for: str
    """The Hugging Face repository of the real model."""
    real_architecture: str
    """The `architectures` class of the real checkpoint (a wrapper class for Kimi-K2.5)."""
    real_config: Mapping[str, Any]
    """The real language-model config the miniature is derived from (Kimi's `text_config`)."""
    changes: tuple[ConfigChange, ...]
    extra_deviations: tuple[Deviation, ...]
    tensors: tuple[TensorSpec, ...]
    weight_std: float = 0.02
    extra_tokens: tuple[ExtraToken, ...] = ()
    """Tags of the real tokenizer that vLLM's parsers for this model look up by token id."""

    @property
    def architecture(self) -> str:
        """The vLLM model class that loads the miniature."""
        architectures = self.config_without_record()["architectures"]
        assert isinstance(architectures, list)
        return str(architectures[0])

    def config_without_record(self) -> dict[str, Any]:
        config = copy.deepcopy(dict(self.real_config))
        for change in self.changes:
            if change.miniature is REMOVED:
                config.pop(change.field, None)
            else:
                config[change.field] = copy.deepcopy(change.miniature)
        return config

    def deviations(self) -> dict[str, dict[str, Any]]:
        """field -> {"real", "miniature", "why"}; a removed field has miniature None."""
        record: dict[str, dict[str, Any]] = {}
        for change in self.changes:
            record[change.field] = {
                "real": copy.deepcopy(self.real_config.get(change.field)),
                "miniature": None if change.miniature is REMOVED else change.miniature,
                "why": change.why,
            }
        for deviation in self.extra_deviations:
            record[deviation.aspect] = {
                "real": deviation.real,
                "miniature": deviation.miniature,
                "why": deviation.why,
            }
        return record

    def config(self, seed: int) -> dict[str, Any]:
        """The miniature's config.json content for one seed."""
        config = self.config_without_record()
        config[MINIATURE_RECORD_KEY] = {
            "name": self.name,
            "stands_for": self.stands_for,
            "real_architecture": self.real_architecture,
            "seed": seed,
            "weights": f"random normal, std {self.weight_std}; norms one; router biases zero",
            "deviations": self.deviations(),
        }
        return config

    @property
    def parameter_count(self) -> int:
        return sum(spec.numel for spec in self.tensors)
