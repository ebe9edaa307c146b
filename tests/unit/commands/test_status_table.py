"""`switchyard status` in a narrow terminal: every model name, layout and source is shown
whole (as a table when it fits, else one block per model), never cut with an ellipsis."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from domain.status_report import ModelStatus
from switchyard.status_table import MODEL_COLUMNS, model_rows, print_table_or_blocks

pytestmark = pytest.mark.unit


def _model(name: str, source: str) -> ModelStatus:
    return ModelStatus(
        name=name,
        aliases=["default", "coder"],
        state="ready",
        layout="TP1xPP1xDP1",
        source=source,
        replicas=1,
        generated_tok_s=12.5,
    )


def _render(models: list[ModelStatus], width: int) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_table_or_blocks(console, MODEL_COLUMNS, model_rows(models))
    return console.export_text()


def test_in_80_columns_names_layouts_and_sources_are_whole() -> None:
    models = [
        _model("mini-kimi-k2.5", "miniature:kimi-k2.5"),
        _model("mini-minimax-m2.5-on-demand", "moonshotai/Kimi-K2.5@3f2c1e0"),
    ]
    text = _render(models, 80)
    assert "…" not in text
    for m in models:
        assert m.name in text and m.source in text
    assert text.count("TP1xPP1xDP1") == 2


def test_a_wide_terminal_gets_the_table() -> None:
    text = _render([_model("mini-kimi-k2.5", "miniature:kimi-k2.5")], 200)
    assert "TTFT p95" in text.splitlines()[1], "one header row"
    assert "source: " not in text
