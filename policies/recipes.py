"""Per-architecture engine settings, as vLLM's own model recipes use them.

A recipe fills in the engine fields a deployment leaves unset (a file or flag always wins):
the tool-call and reasoning parsers agentic clients need, and speculative decoding where
vLLM supports the checkpoint's MTP layers. A recipe never switches `trust_remote_code` on:
it says when a checkpoint needs it, and admission refuses until the operator sets it
(`remote_code_refusal`). Each entry names its source; `vllm-project/recipes` paths are at
commit RECIPES_COMMIT.

Pure: no vLLM import; the parser names are checked against the installed vLLM at the edge
(switchyard/engine_args.py) and in a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policies.checkpoint.model_spec import ModelSpec
from policies.reasons import Reason, ReasonCode

RECIPES_COMMIT: Final = "8959cf6"
"""The vllm-project/recipes commit the sources below were read at."""


@dataclass(frozen=True)
class Recipe:
    """What vLLM's recipe for one architecture sets."""

    name: str
    engine: Mapping[str, Any]
    """Engine fields (domain EngineConfig names) and their values; `extra` holds other vLLM
    arguments."""
    source: str
    """Where the settings come from (a recipes path, a model card)."""
    needs_trust_remote_code: bool = False
    """The checkpoint ships code vLLM must run (its tokenizer or config class)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in sorted(self.engine.items()))
        return f"recipe {self.name}: {settings or 'no settings'} ({self.source})"


def _tools(tool: str, reasoning: str | None = None) -> dict[str, Any]:
    engine: dict[str, Any] = {"tool_call_parser": tool, "enable_auto_tool_choice": True}
    if reasoning is not None:
        engine["reasoning_parser"] = reasoning
    return engine


_RECIPES = "vllm-project/recipes models/{}.yaml@" + RECIPES_COMMIT

# `vllm serve moonshotai/Kimi-K2.5 -tp 8 --mm-encoder-tp-mode data --tool-call-parser kimi_k2
# --reasoning-parser kimi_k2 --enable-auto-tool-choice --trust-remote-code`. Its Eagle3 draft
# is a second repository, not the checkpoint's MTP (it declares none), so it is left out.
_KIMI_K25 = Recipe(
    "kimi-k2.5",
    _tools("kimi_k2", "kimi_k2"),
    _RECIPES.format("moonshotai/Kimi-K2.5"),
    needs_trust_remote_code=True,
)
# Kimi-K2 (text only) has DeepSeek-V3's architecture and its own parsers.
_KIMI_K2 = Recipe(
    "kimi-k2",
    _tools("kimi_k2", "kimi_k2"),
    _RECIPES.format("moonshotai/Kimi-K2-Thinking"),
    needs_trust_remote_code=True,
)
# M2, M2.1, M2.5 and M2.7 share it; the recipe moved from `minimax_m2_append_think` to
# `minimax_m2` (reasoning split out) in ce9ddee. vLLM's MiniMaxM2 loader drops the MTP
# modules the config declares (their weights were never published): no speculation.
_MINIMAX_M2 = Recipe(
    "minimax-m2",
    _tools("minimax_m2", "minimax_m2"),
    _RECIPES.format("MiniMaxAI/MiniMax-M2.5"),
    needs_trust_remote_code=True,
)
# The recipe's `--chat-template examples/tool_chat_template_deepseekv3.jinja` is a file of
# vLLM's source tree, not of its wheel: set engine.chat_template to use it. Its MTP layer is
# supported by vLLM but not used by the recipe.
_DEEPSEEK_V3 = Recipe(
    "deepseek-v3",
    _tools("deepseek_v3", "deepseek_v3"),
    _RECIPES.format("deepseek-ai/DeepSeek-V3"),
    needs_trust_remote_code=True,
)
# MTP is opt-in there (`{"method":"mtp","num_speculative_tokens":3}`), so not a default.
_DEEPSEEK_V32 = Recipe(
    "deepseek-v3.2",
    {**_tools("deepseek_v32", "deepseek_v3"), "extra": {"tokenizer_mode": "deepseek_v32"}},
    _RECIPES.format("deepseek-ai/DeepSeek-V3.2"),
    needs_trust_remote_code=True,
)
_GLM5 = Recipe(
    "glm-5",
    _tools("glm47", "glm45"),
    _RECIPES.format("zai-org/GLM-5"),
    needs_trust_remote_code=True,
)
# GLM-4.7's `glm47` and GLM-4.5/4.6's `glm45` are one parser class in vLLM 0.32.
_GLM45 = Recipe(
    "glm-4.5",
    _tools("glm45", "glm45"),
    _RECIPES.format("zai-org/GLM-4.5"),
    needs_trust_remote_code=True,
)
_QWEN3 = Recipe("qwen3", _tools("hermes", "qwen3"), _RECIPES.format("Qwen/Qwen3-32B"))
_QWEN3_MOE = Recipe("qwen3-moe", _tools("hermes", "qwen3"), _RECIPES.format("Qwen/Qwen3-30B-A3B"))
# gpt-oss's reasoning comes through vLLM's harmony path, no reasoning parser.
_GPT_OSS = Recipe("gpt-oss", _tools("openai"), _RECIPES.format("openai/gpt-oss-120b"))

RECIPES: Final[Mapping[str, Recipe]] = {
    "KimiK25ForConditionalGeneration": _KIMI_K25,
    "MiniMaxM2ForCausalLM": _MINIMAX_M2,
    "DeepseekV3ForCausalLM": _DEEPSEEK_V3,
    "DeepseekV32ForCausalLM": _DEEPSEEK_V32,
    "GlmMoeDsaForCausalLM": _GLM5,
    "Glm4MoeForCausalLM": _GLM45,
    "Qwen3ForCausalLM": _QWEN3,
    "Qwen3MoeForCausalLM": _QWEN3_MOE,
    "GptOssForCausalLM": _GPT_OSS,
}
"""By the architecture vLLM loads (the multimodal wrapper's, when there is one). Llama,
Qwen2 and DeepSeek-V2 have no recipe that sets parsers (their recipes pass none)."""

_BY_MODEL_TYPE: Final[Mapping[tuple[str, str], Recipe]] = {
    ("DeepseekV3ForCausalLM", "kimi_k2"): _KIMI_K2,
}
"""Checkpoints that share an architecture but not its parsers."""


def recipe_for(spec: ModelSpec, stands_for: tuple[str, str] | None = None) -> Recipe | None:
    """The recipe of `spec`'s architecture; None when vLLM's recipes set nothing for it.

    `stands_for` is the (architecture, model type) of the real model a generated miniature
    stands for: its tokenizer carries that model's parser tokens, so it takes that recipe."""
    architecture, model_type = stands_for or (
        spec.wrapper_architecture or spec.architecture,
        spec.model_type,
    )
    return _BY_MODEL_TYPE.get((architecture, model_type)) or RECIPES.get(architecture)


def remote_code_refusal(
    recipe: Recipe | None, trusted: bool | None, ships_code: bool | None
) -> Reason | None:
    """Refuse a checkpoint that needs remote code the operator has not trusted.

    `ships_code` is what the checkpoint at hand says (an `auto_map` in its config or
    tokenizer config): False when it ships none (a generated miniature), None when only
    its config.json was read (a hub dry run), so the recipe's word stands."""
    if recipe is None or not recipe.needs_trust_remote_code or trusted is True:
        return None
    if ships_code is False:
        return None
    return Reason(
        ReasonCode.TRUST_REMOTE_CODE_REQUIRED,
        f"{recipe.name} checkpoints ship code vLLM must run (tokenizer or config class; "
        f"{recipe.source}); set engine.trust_remote_code: true once you trust the source",
    )
