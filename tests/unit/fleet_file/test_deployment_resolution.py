"""What a deployment becomes once its model's config is read: the recipe on the engine
fields left unset (what the operator set wins), and remote code refused until trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cluster.fleet.deployment_resolution import resolve_deployment, ships_remote_code
from domain.deployment_config import EngineConfig, ModelDeploymentConfig

pytestmark = pytest.mark.unit

REFERENCE = Path(__file__).parents[3] / "cluster" / "miniature_generator" / "reference_configs"


def _model_dir(tmp_path: Path, name: str, *, tokenizer_code: bool | None) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    shutil.copy(REFERENCE / f"{name}.config.json", directory / "config.json")
    if tokenizer_code is not None:
        config = {"auto_map": {"AutoTokenizer": ["tok.T", None]}} if tokenizer_code else {}
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def _config(**engine: object) -> ModelDeploymentConfig:
    return ModelDeploymentConfig(
        name="kimi", source="miniature:kimi-k2.5", engine=EngineConfig.model_validate(engine)
    )


def test_the_recipe_fills_what_the_request_left_unset(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path, "Kimi-K2.5", tokenizer_code=False)
    resolved = resolve_deployment(_config(reasoning_parser="deepseek_r1"), model_dir)
    assert not resolved.refusals
    engine = resolved.config.engine
    assert engine.tool_call_parser == "kimi_k2" and engine.enable_auto_tool_choice
    assert engine.reasoning_parser == "deepseek_r1", "the operator's setting wins"
    assert "tool_call_parser" in resolved.recipe_settings
    assert "reasoning_parser" not in resolved.recipe_settings
    assert engine.trust_remote_code is None, "a recipe never trusts code"


def test_a_checkpoint_with_its_own_code_is_refused_until_trusted(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path, "Kimi-K2.5", tokenizer_code=True)
    assert ships_remote_code(model_dir) is True
    (refusal,) = resolve_deployment(_config(), model_dir).refusals
    assert refusal.startswith("trust_remote_code_required: ")
    assert not resolve_deployment(_config(trust_remote_code=True), model_dir).refusals


def test_a_config_read_alone_cannot_prove_there_is_no_code(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path, "Kimi-K2.5", tokenizer_code=None)
    assert ships_remote_code(model_dir) is None
    assert resolve_deployment(_config(), model_dir).refusals
