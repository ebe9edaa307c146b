"""`switchyard status`'s tables as people read them: a table when the terminal is wide
enough for every value whole, else one block per row.

Rich shrinks a table that does not fit by cutting cells with an ellipsis, which hid the very
values an operator copies (`mini-ki…`, `TP1xPP1…`): names, layouts and sources are never
cut here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.status_report import ModelStatus

MODEL_COLUMNS = ("model", "aliases", "state", "layout", "replicas", "source", "tok/s", "TTFT p95")


def model_rows(models: Sequence[ModelStatus]) -> list[tuple[str, ...]]:
    return [
        (
            m.name,
            ", ".join(m.aliases) or "-",
            m.state,
            m.layout,
            str(m.replicas),
            m.source,
            "-" if m.generated_tok_s is None else f"{m.generated_tok_s:.1f}",
            "-" if m.ttft_p95_s is None else f"{m.ttft_p95_s * 1000:.0f} ms",
        )
        for m in models
    ]


def fits(console: Any, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> bool:
    """Whether a table of these cells fits `console` with none cut: a column is as wide as
    its widest cell, plus 3 per column for padding and rule, plus 1 for the last rule."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return sum(widths) + 3 * len(widths) + 1 <= int(console.width)


def print_table_or_blocks(
    console: Any,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """A table if every cell fits whole, else per row its first cell, then its other cells
    as `column: value` pairs (wrapped, none cut)."""
    from rich.markup import escape
    from rich.table import Table

    if fits(console, columns, rows):
        table = Table(*columns, title=title)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
        return
    if title is not None:
        console.print(escape(title), highlight=False)
    width = int(console.width)
    for row in rows:
        console.print(f"[bold]{escape(row[0])}[/bold]", highlight=False)
        pairs = [f"{column}: {cell}" for column, cell in zip(columns[1:], row[1:], strict=True)]
        for line in _lines_of(pairs, width - 2):
            # Broken between pairs only; a pair wider than the terminal is folded whole.
            console.print(escape("  " + line), highlight=False, overflow="fold", soft_wrap=False)


def _lines_of(pairs: Sequence[str], width: int) -> list[str]:
    lines: list[str] = []
    for pair in pairs:
        if lines and len(lines[-1]) + 3 + len(pair) <= width:
            lines[-1] += " | " + pair
        else:
            lines.append(pair)
    return lines
