"""Per-architecture recipes: vLLM's recipe settings by architecture, parser names the
installed vLLM registers, and the remote-code rule (a recipe never trusts code itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.checkpoint.hf_config import SUPPORTED_ARCHITECTURES, load_model_spec
from policies.reasons import ReasonCode
from policies.recipes import RECIPES, recipe_for, remote_code_refusal
from switchyard.engine_args import parser_names

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = Path(__file__).parents[3] / "cluster" / "miniature_generator" / "reference_configs"


def test_the_story_models_get_their_parsers() -> None:
    kimi = recipe_for(load_model_spec(REFERENCE / "Kimi-K2.5.config.json"))
    minimax = recipe_for(load_model_spec(REFERENCE / "MiniMax-M2.5.config.json"))
    assert kimi is not None and minimax is not None
    assert (kimi.engine["tool_call_parser"], kimi.engine["reasoning_parser"]) == (
        "kimi_k2",
        "kimi_k2",
    )
    assert minimax.engine["tool_call_parser"] == "minimax_m2"
    assert kimi.engine["enable_auto_tool_choice"] and kimi.needs_trust_remote_code
    assert "speculative_config" not in kimi.engine, "Kimi-K2.5 declares no MTP layers"
    assert "speculative_config" not in minimax.engine, "vLLM drops MiniMax-M2's MTP modules"


def test_architectures_without_a_recipe_get_none() -> None:
    assert recipe_for(load_model_spec(FIXTURES / "Llama-3-70B.config.json")) is None
    assert set(RECIPES) <= set(SUPPORTED_ARCHITECTURES)


def test_every_recipe_parser_is_registered_in_the_installed_vllm() -> None:
    tools, reasoning = parser_names("tool"), parser_names("reasoning")
    if not tools:
        pytest.skip("vLLM is not installed")
    for recipe in RECIPES.values():
        assert recipe.engine["tool_call_parser"] in tools, recipe.name
        assert recipe.engine.get("reasoning_parser", "kimi_k2") in reasoning, recipe.name


@pytest.mark.parametrize(
    ("trusted", "ships_code", "refused"),
    [
        (None, True, True),  # the checkpoint names its code; not trusted
        (None, None, True),  # only config.json was read: the recipe's word stands
        (None, False, False),  # a generated miniature ships none
        (True, True, False),  # the operator trusted it
        (False, True, True),
    ],
)
def test_remote_code_is_refused_until_the_operator_trusts_it(
    trusted: bool | None, ships_code: bool | None, refused: bool
) -> None:
    recipe = RECIPES["KimiK25ForConditionalGeneration"]
    reason = remote_code_refusal(recipe, trusted, ships_code)
    assert (reason is not None) is refused
    if reason is not None:
        assert reason.code == ReasonCode.TRUST_REMOTE_CODE_REQUIRED
        assert "engine.trust_remote_code: true" in reason.message
