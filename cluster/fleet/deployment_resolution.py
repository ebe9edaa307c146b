"""What a requested deployment becomes once its model's config is read.

The architecture's recipe (policies/recipes.py) fills in the engine fields the request left
unset, and a checkpoint that needs remote code the operator has not trusted is refused. The same
resolution serves an operation (cluster/fleet/preflight.py) and a plan
(cluster/fleet/fleet_plan.py), so `diff` shows exactly what `apply` will deploy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from domain.deployment_config import ModelDeploymentConfig
from policies.checkpoint.hf_config import load_model_spec
from policies.errors import PolicyInputError
from policies.recipes import recipe_for, remote_code_refusal

_CODE_FILES = ("config.json", "tokenizer_config.json")


@dataclass(frozen=True)
class Resolution:
    config: ModelDeploymentConfig
    notes: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()
    recipe_settings: tuple[str, ...] = ()
    """The engine fields the recipe set (the request left them unset)."""


def resolve_deployment(config: ModelDeploymentConfig, model_dir: Path) -> Resolution:
    """`config` with its architecture's recipe applied to what it leaves unset."""
    try:
        spec = load_model_spec(model_dir)
    except PolicyInputError:
        return Resolution(config)  # admission reports the config's problem itself
    recipe = recipe_for(spec, miniature_stands_for(model_dir))
    if recipe is None:
        return Resolution(config)
    unset = {
        k: v for k, v in recipe.engine.items() if k != "extra" and getattr(config.engine, k) is None
    }
    extra = {
        k: v for k, v in recipe.engine.get("extra", {}).items() if k not in config.engine.extra
    }
    engine = config.engine.with_unset(unset)
    if extra:
        engine = engine.model_copy(update={"extra": {**extra, **engine.extra}})
        unset.update({f"extra.{k}": v for k, v in extra.items()})
    resolved = config.model_copy(update={"engine": engine})
    applied = ", ".join(f"{k}={v}" for k, v in sorted(unset.items())) or "nothing left unset"
    notes = [f"recipe {recipe.name} ({recipe.source}): {applied}"]
    refusal = remote_code_refusal(recipe, engine.trust_remote_code, ships_remote_code(model_dir))
    refusals = (str(refusal),) if refusal is not None else ()
    return Resolution(resolved, tuple(notes), refusals, tuple(sorted(unset)))


def miniature_stands_for(model_dir: Path) -> tuple[str, str] | None:
    """(architecture, model type) of the real model a generated miniature stands for, from
    its config's `switchyard_miniature` record (cluster/miniature_generator/); None for a real
    model. A miniature of Kimi-K2.5 is its text model (DeepseekV3ForCausalLM) with Kimi's
    tokenizer tokens, so it takes Kimi's recipe, not DeepSeek-V3's."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = config.get("switchyard_miniature") if isinstance(config, dict) else None
    if not isinstance(record, dict) or not isinstance(record.get("real_architecture"), str):
        return None
    model_type = record.get("deviations", {}).get("model_type", {}).get("real")
    return record["real_architecture"], str(model_type or config.get("model_type", ""))


def ships_remote_code(model_dir: Path) -> bool | None:
    """Whether the checkpoint names code of its own (`auto_map`) in its config or tokenizer
    config; None when its tokenizer config was not read (a config-only dry run of a hub id)."""
    found_all = True
    for name in _CODE_FILES:
        path = model_dir / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found_all = False
            continue
        if isinstance(data, dict) and data.get("auto_map"):
            return True
    return False if found_all else None
