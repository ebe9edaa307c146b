"""The fleet file: a whole fleet's desired state, kept under version control.

`switchyard apply -f fleet.yaml` makes the live fleet match it, `diff` shows what that would
do, `export` writes the live fleet back as one. One pydantic model validates it (`FleetFile`,
`extra="forbid"` everywhere); `switchyard fleet schema` prints its JSON Schema.

A model's entry is kept as written (which fields were set, `layout: auto`): the manager
stores it with the deployment, so `diff` compares entries, not what they resolved to, and
`export` gives back what the operator wrote. Secrets are never written in the file: a field
that names one ends in `_env` and holds an environment variable's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from domain.alias_map import aliases_by_model
from domain.deployment_config import (
    EngineConfig,
    LayoutConfig,
    ModelDeploymentConfig,
    validate_model_name,
)
from domain.exit_codes import UserInputError
from domain.residency import MIN_RESIDENT_S, PARK_AFTER_IDLE_S, ParkMode, Residency
from domain.tenant_keys import KeyEntry, KeysFile
from domain.validation_message import validation_line

Objective = Literal["latency", "throughput"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FleetLayout(LayoutConfig):
    """An explicit layout: a deployment's; omitted keys are 1 (ep: false)."""

    def to_config(self) -> LayoutConfig:
        return LayoutConfig(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep, dcp=self.dcp)

    @classmethod
    def of(cls, layout: LayoutConfig) -> FleetLayout:
        """`layout` written out: `tp` always (an explicit layout reads as one), the rest
        where it differs from the default."""
        return cls.model_validate({"tp": layout.tp, **layout.model_dump(exclude_defaults=True)})


def _layout_kind(value: Any) -> str:
    return "auto" if isinstance(value, str) else "layout"


LayoutEntry = Annotated[
    Annotated[Literal["auto"], Tag("auto")] | Annotated[FleetLayout, Tag("layout")],
    Discriminator(_layout_kind),
]
"""`auto`, or an explicit layout (errors then name the layout's own field)."""


class FleetModelEntry(_Strict):
    """One model of the fleet, as the operator wrote it."""

    name: str
    source: str = Field(min_length=1, description="hub id[@rev], local dir or miniature:NAME")
    aliases: tuple[str, ...] = ()
    replicas: int = Field(1, ge=1, le=64, description="independent engine copies")
    objective: Objective = Field(
        "throughput", description="what `layout: auto` optimises (latency or throughput)"
    )
    layout: LayoutEntry = Field(
        "auto", description="'auto' (admission's recommendation, resolved at deploy) or tp/pp/..."
    )
    engine: EngineConfig = EngineConfig()
    residency: Residency = Field(
        Residency.ALWAYS,
        description="always (resident until an operator changes it) or on_demand (parked "
        "when idle or to make room, woken by the next request)",
    )
    park_after_idle_s: float = Field(
        PARK_AFTER_IDLE_S,
        gt=0,
        le=30 * 86400,
        description="on_demand: park after this long without a request",
    )
    min_resident_s: float = Field(
        MIN_RESIDENT_S,
        ge=0,
        le=30 * 86400,
        description="on_demand: never parked to make room before it has served this long",
    )
    park_mode: ParkMode = Field(
        ParkMode.UNLOAD,
        description="unload (the engine is removed; a wake is a cold start) or sleep (vLLM's "
        "sleep mode: the engine process stays; changing to or from it restarts the engine)",
    )
    sleep_level: Literal[1, 2] = Field(
        1,
        description="park_mode sleep: 1 (weights kept in pinned host memory) or 2 (weights "
        "discarded, reloaded from the node's weight cache on wake)",
    )

    @model_validator(mode="after")
    def _on_demand_keys(self) -> FleetModelEntry:
        if "sleep_level" in self.model_fields_set and self.park_mode is not ParkMode.SLEEP:
            raise ValueError(
                f"sleep_level: only meaningful with park_mode: sleep (this model parks by "
                f"'{self.park_mode.value}')"
            )
        if self.residency is Residency.ALWAYS:
            for key in ("park_after_idle_s", "min_resident_s"):
                if key in self.model_fields_set:
                    raise ValueError(
                        f"{key}: only meaningful with residency: on_demand (this model is "
                        "always resident)"
                    )
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_model_name(value)

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alias in value:
            validate_model_name(alias, "aliases")
        if len(set(value)) != len(value):
            raise ValueError(f"aliases {list(value)} repeat a name")
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        from domain.model_source import parse_model_source

        try:
            parse_model_source(value)
        except UserInputError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def auto_layout(self) -> bool:
        return self.layout == "auto"

    def deployment(self, layout: LayoutConfig | None = None) -> ModelDeploymentConfig:
        """The deployment this entry asks for; `layout` resolves `auto` (1x1x1 until it is).

        Only the engine fields the entry sets are carried as set, so the recipe and the
        platform's defaults still apply to the others."""
        if layout is None:
            layout = LayoutConfig() if isinstance(self.layout, str) else self.layout.to_config()
        config = ModelDeploymentConfig.model_validate(
            {
                "name": self.name,
                "source": self.source,
                "aliases": list(self.aliases),
                "layout": layout.model_dump(),
                "engine": self.engine.model_dump(exclude_unset=True),
                "replicas": self.replicas,
            }
        )
        return self.with_park_engine(config)

    def with_park_engine(self, config: ModelDeploymentConfig) -> ModelDeploymentConfig:
        """`config` with what this entry's park mode asks of the engine: sleep mode enabled
        for `park_mode: sleep`, so that parking it is vLLM's `sleep`."""
        if self.park_mode is not ParkMode.SLEEP or config.engine.enable_sleep_mode:
            return config
        engine = config.engine.model_copy(update={"enable_sleep_mode": True})
        return config.model_copy(update={"engine": engine})

    def deployed_form(self) -> dict[str, Any]:
        """What a redeploy depends on: source, layout (with the objective when it is
        `auto`), engine settings as written, replicas. Names and aliases are not in it."""
        form: dict[str, Any] = {
            "source": self.source,
            "replicas": self.replicas,
            "engine": self.engine.model_dump(mode="json", exclude_unset=True),
        }
        if isinstance(self.layout, str):
            form["layout"] = {"auto": self.objective}
        else:
            form["layout"] = self.layout.model_dump(exclude_defaults=True)
        if self.park_mode is ParkMode.SLEEP:
            # The engine starts with sleep mode enabled, so moving to or from it is a restart.
            form["park_mode"] = self.park_mode.value
        return form

    def residency_form(self) -> dict[str, Any]:
        """When the fleet parks and wakes it: changed by a `residency` step, no redeploy."""
        return {
            "residency": self.residency.value,
            "park_after_idle_s": self.park_after_idle_s,
            "min_resident_s": self.min_resident_s,
            "park_mode": self.park_mode.value,
            **({"sleep_level": self.sleep_level} if self.park_mode is ParkMode.SLEEP else {}),
        }

    def written(self) -> dict[str, Any]:
        """The entry as a file holds it: only what was set."""
        data = self.model_dump(mode="json", exclude_unset=True)
        return {"name": data.pop("name"), "source": data.pop("source"), **data}

    @classmethod
    def of_config(cls, config: ModelDeploymentConfig) -> FleetModelEntry:
        """The entry of a model added without a file (`add`, `up --model`): an explicit
        layout and the engine settings the request set."""
        data: dict[str, Any] = {
            "name": config.name,
            "source": config.source,
            "layout": FleetLayout.of(config.layout).model_dump(exclude_unset=True),
            "engine": config.engine.model_dump(exclude_unset=True),
        }
        if config.aliases:
            data["aliases"] = list(config.aliases)
        if config.replicas != 1:
            data["replicas"] = config.replicas
        return cls.model_validate(data)


class GatewaySection(_Strict):
    """The endpoint's tenants: `keys`, the same entries as an `up --keys` file
    (docs/tenants.md). Omitted: the stack keeps the keys it was started with."""

    keys: tuple[KeyEntry, ...] | None = None

    @field_validator("keys")
    @classmethod
    def _unique(cls, keys: tuple[KeyEntry, ...] | None) -> tuple[KeyEntry, ...] | None:
        if keys is not None:
            KeysFile(keys=keys)  # the same checks as a keys file (unique names)
        return keys


class FleetFile(_Strict):
    """The desired fleet: its models, and its gateway's tenant keys."""

    models: tuple[FleetModelEntry, ...] = ()
    gateway: GatewaySection = GatewaySection()

    @model_validator(mode="after")
    def _names(self) -> FleetFile:
        seen: dict[str, int] = {}
        for i, model in enumerate(self.models):
            if model.name in seen:
                raise ValueError(
                    f"models[{i}].name: the name '{model.name}' is already used by "
                    f"models[{seen[model.name]}]; model names must be unique"
                )
            seen[model.name] = i
        owner: dict[str, str] = {}
        for i, model in enumerate(self.models):
            for alias in model.aliases:
                if alias in seen:
                    raise ValueError(
                        f"models[{i}] ({model.name}).aliases: '{alias}' is the name of a "
                        "model; an alias must not be a model name"
                    )
                if alias in owner:
                    raise ValueError(
                        f"models[{i}] ({model.name}).aliases: '{alias}' is already an alias "
                        f"of {owner[alias]}; an alias names one model"
                    )
                owner[alias] = model.name
        return self

    def model(self, name: str) -> FleetModelEntry | None:
        return next((m for m in self.models if m.name == name), None)

    def alias_targets(self) -> dict[str, str]:
        return {alias: m.name for m in self.models for alias in m.aliases}


def parse_fleet_file(text: str, where: str) -> FleetFile:
    """The validated fleet in `text` (YAML or JSON); a bad one raises UserInputError with one
    line naming the model, the field, the value and what is allowed."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise UserInputError(f"{where}: not valid YAML ({first})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserInputError(
            f"{where}: the top level must be a mapping with `models:` (and `gateway:`), "
            f"not a {type(data).__name__}"
        )
    try:
        return FleetFile.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{where}: {validation_line(exc, _entry_name(data))}") from None


def read_fleet_file(path: Any) -> tuple[FleetFile, str]:
    """The validated fleet of the file at `path`, and the file's sha256."""
    import hashlib
    from pathlib import Path

    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UserInputError(f"-f {file}: cannot read it ({exc.strerror or exc})") from None
    return parse_fleet_file(raw.decode("utf-8", errors="replace"), str(file)), hashlib.sha256(
        raw
    ).hexdigest()


def exported_entries(
    requested: Mapping[str, FleetModelEntry], aliases: Mapping[str, str]
) -> list[FleetModelEntry]:
    """Each live model's entry as asked for (`requested`: name -> entry), with the aliases
    it has now (`aliases`: alias -> name), by name: what `export` prints, and what `diff
    -f` of that shows no changes against."""
    by_model = aliases_by_model(aliases)
    entries = []
    for name, entry in sorted(requested.items()):
        now = by_model.get(name, ())
        if now != entry.aliases:
            entry = FleetModelEntry.model_validate(
                {**entry.model_dump(mode="json", exclude_unset=True), "aliases": now}
            )
        entries.append(entry)
    return entries


def fleet_file_text(models: Sequence[FleetModelEntry]) -> str:
    """A file `apply` accepts holding `models`, each as written."""
    import yaml

    data = {"models": [m.written() for m in models]}
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def _entry_name(data: dict[str, Any]) -> Any:
    """`models[1] (mini-kimi): engine.max_num_seqs` for a field of one model's entry."""
    models = data.get("models")

    def name(loc: Sequence[str]) -> str:
        if len(loc) >= 2 and loc[0] == "models" and str(loc[1]).isdigit():
            index = int(loc[1])
            label = f"models[{index}]"
            if isinstance(models, list) and index < len(models):
                entry = models[index]
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    label = f"model '{entry['name']}' (models[{index}])"
            rest: list[str] = []
            for part in loc[2:]:
                # The layout's union tags ("auto", "layout") repeat what the path says.
                if rest and rest[-1] == "layout" and part in ("auto", "layout"):
                    continue
                rest.append(part)
            return f"{label}: {'.'.join(rest)}" if rest else label
        return ".".join(loc)

    return name
