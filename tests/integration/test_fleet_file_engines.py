"""A fleet file on real vLLM engines (the suite's real stack, after the story's swap and the
killed engine): the live fleet exported, edited to replace the Llama miniature behind
`small` with the Kimi miniature at engine settings of its own, applied; then through the
official `openai` client both models serve, the file's `max_model_len` is what a too-long
`max_tokens` is refused against, and `tool_choice="required"` returns parsed `tool_calls`
with the recipe's tool-call *and* reasoning parsers set.

Why `include_reasoning: false`: with a reasoning parser, vLLM holds the tool grammar back
until the model's reasoning ends (`</think>`), which random weights rarely emit. A request
that does not want reasoning returned counts it as ended (vLLM's chat front end), so the
grammar applies from the first token; the recipe's settings stay as they are.

Leaves the real stack serving MiniMax (`default`) and `mini-kimi-file` (`small`). The file
flow under load, `ray job submit`, bad files and refusals are tests/e2e/test_fleet_file.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import openai
import pytest
import yaml

from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import API_KEY

KIMI_FILE = "mini-kimi-file"
MAX_MODEL_LEN = 384
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(scope="module")
def applied(real_stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The live fleet with `small`'s model replaced by the Kimi miniature, applied."""
    exported = real_stack.cli("export")
    assert exported.returncode == 0, exported.stderr
    fleet: dict[str, Any] = yaml.safe_load(exported.stdout)
    small = [m for m in fleet["models"] if "small" in m.get("aliases", [])]
    assert len(small) == 1, fleet
    fleet["models"].remove(small[0])
    fleet["models"].append(
        {
            "name": KIMI_FILE,
            "source": "miniature:kimi-k2.5",
            "aliases": ["small"],
            "layout": {"tp": 1},
            "engine": {"max_model_len": MAX_MODEL_LEN, "max_num_seqs": 4},
        }
    )
    path = tmp_path_factory.mktemp("fleet") / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet, sort_keys=False))
    plan = real_stack.cli("diff", "-f", str(path), "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    (change,) = json.loads(plan.stdout)["changes"]
    assert (change["action"], change["model"], change["replaces"]) == (
        "swap",
        KIMI_FILE,
        small[0]["name"],
    )
    assert change["engine"]["tool_call_parser"] == "kimi_k2", "the recipe, shown in the plan"
    assert change["engine"]["reasoning_parser"] == "kimi_k2"
    result = real_stack.cli("apply", "-f", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    return path


@pytest.fixture(scope="module")
def client(real_stack: RunningStack, applied: Path) -> openai.OpenAI:
    return openai.OpenAI(base_url=real_stack.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def test_both_models_of_the_file_serve(client: openai.OpenAI) -> None:
    for alias in ("default", "small"):
        reply = client.chat.completions.create(
            model=alias, messages=[{"role": "user", "content": "Hello"}], max_tokens=4
        )
        assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.model == KIMI_FILE


def test_the_files_max_model_len_is_what_a_long_request_is_refused_against(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="small",
            messages=[{"role": "user", "content": "Hello"}],
            max_tokens=MAX_MODEL_LEN + 16,
        )
    assert str(MAX_MODEL_LEN) in str(caught.value)


def test_tool_choice_required_returns_parsed_tool_calls(client: openai.OpenAI) -> None:
    # The grammar fixes the call's shape and its one allowed value, but not the whitespace
    # inside the arguments, which random weights may pad out to `max_tokens`; greedy
    # decoding of the seed-0 miniature closes the call for the first of these prompts.
    finished = []
    for prompt in ("Weather in Paris?", "What is the weather in Paris?", "Paris weather"):
        reply = client.chat.completions.create(
            model="small",
            messages=[{"role": "user", "content": prompt}],
            tools=[cast(Any, WEATHER)],
            tool_choice="required",
            parallel_tool_calls=False,
            temperature=0,
            max_tokens=200,
            extra_body={"include_reasoning": False},
        )
        choice = reply.choices[0]
        (call,) = choice.message.tool_calls or []
        assert call.type == "function" and call.function.name == "get_weather", choice
        if choice.finish_reason == "tool_calls":
            finished.append(json.loads(call.function.arguments))
            break
    assert finished == [{"city": "Paris"}]


def test_the_exported_fleet_is_the_applied_one(real_stack: RunningStack, applied: Path) -> None:
    exported = real_stack.cli("export")
    again = applied.with_name("exported.yaml")
    again.write_text(exported.stdout)
    plan = real_stack.cli("diff", "-f", str(again), "--json")
    assert plan.returncode == 0 and json.loads(plan.stdout)["changes"] == [], plan.stdout
