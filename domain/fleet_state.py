"""The fleet's desired state: which models serve, under which app generation, and aliases.

Persisted as `fleet.json` in the manager's state directory (cluster/journal.py), with a
format version: a file of another format is refused with what to do, never guessed at.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig

FLEET_FORMAT_VERSION = 2
"""Format 1 (before generations) had no `format_version` key and `model-<name>` apps."""


class FleetModel(BaseModel):
    """One model the fleet serves, as it was requested and where it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: ModelDeploymentConfig
    generation: int = Field(ge=1)

    @property
    def app(self) -> AppName:
        return AppName(self.config.name, self.generation)


class FleetState(BaseModel):
    """An immutable snapshot; every change makes a new one (see the `with_*` methods)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: Literal[2] = 2
    models: dict[str, FleetModel] = Field(default_factory=dict)
    aliases: dict[str, str] = Field(default_factory=dict)
    """alias -> model name."""
    startup_seconds: dict[str, float] = Field(default_factory=dict)
    """How long the last start of each (source, layout) took, deploy to warmed: what the
    manager predicts a break-before-make hold from."""
    generations: dict[str, int] = Field(default_factory=dict)
    """The last generation handed out per model name, kept after a model is removed so a
    new deployment of that name never reuses the app name of one still shutting down."""

    def startup_of(self, config: ModelDeploymentConfig) -> float | None:
        return self.startup_seconds.get(startup_key(config))

    def with_startup(self, config: ModelDeploymentConfig, seconds: float) -> FleetState:
        started = {**self.startup_seconds, startup_key(config): round(seconds, 3)}
        return self.model_copy(update={"startup_seconds": started})

    def next_app(self, name: str) -> AppName:
        return AppName(name, self.generations.get(name, 0) + 1)

    def aliases_of(self, name: str) -> tuple[str, ...]:
        return tuple(sorted(a for a, m in self.aliases.items() if m == name))

    def with_generation(self, app: AppName) -> FleetState:
        generations = {
            **self.generations,
            app.model: max(app.generation, self.generations.get(app.model, 0)),
        }
        return self.model_copy(update={"generations": generations})

    def with_model(self, config: ModelDeploymentConfig, generation: int) -> FleetState:
        """`config` serving as `generation`, its aliases pointing at it."""
        models = {**self.models, config.name: FleetModel(config=config, generation=generation)}
        aliases = {**self.aliases, **dict.fromkeys(config.aliases, config.name)}
        return self.with_generation(AppName(config.name, generation)).model_copy(
            update={"models": models, "aliases": aliases}
        )

    def without_model(self, name: str) -> FleetState:
        """`name` gone with the aliases that pointed at it."""
        models = {n: m for n, m in self.models.items() if n != name}
        aliases = {a: m for a, m in self.aliases.items() if m != name}
        return self.model_copy(update={"models": models, "aliases": aliases})

    def with_alias(self, alias: str, name: str) -> FleetState:
        return self.model_copy(update={"aliases": {**self.aliases, alias: name}})


def startup_key(config: ModelDeploymentConfig) -> str:
    """What a start's duration depends on most: the weights and the layout."""
    return f"{config.source} {config.layout}"
