"""One rule for the Serve application that runs a model: `model-<name>-g<generation>`.

Every deployment of a model gets the next generation number, so two Serve applications of
the same model name can run at once (a same-name update, a make-before-break swap) and a
restarted manager can tell which one an interrupted operation was bringing up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.deployment_config import MODEL_NAME_PATTERN, validate_model_name

_PREFIX = "model-"
_APP = re.compile(rf"^{_PREFIX}(?P<name>{MODEL_NAME_PATTERN[1:-1]})-g(?P<generation>[1-9]\d*)$")


@dataclass(frozen=True, order=True)
class AppName:
    """A model's Serve application: the model's name and the deployment's generation."""

    model: str
    generation: int

    def __post_init__(self) -> None:
        validate_model_name(self.model)
        if self.generation < 1:
            raise ValueError(f"generation={self.generation} is not allowed: it starts at 1")

    @property
    def app(self) -> str:
        return f"{_PREFIX}{self.model}-g{self.generation}"

    @property
    def deployment(self) -> str:
        # Ray Serve LLM names the deployment `<name_prefix><model_id>`, with '/' -> '--'
        # and '.' -> '_' in the model id (ray.llm ... core/server/builder.py).
        return f"{self.app}:" + self.model.replace("/", "--").replace(".", "_")

    def next(self) -> AppName:
        return AppName(self.model, self.generation + 1)

    def __str__(self) -> str:
        return self.app

    @classmethod
    def parse(cls, app: str) -> AppName | None:
        """The model and generation of a Serve application name; None for any other app."""
        match = _APP.match(app)
        if match is None:
            return None
        return cls(match["name"], int(match["generation"]))
