"""Aliases as the fleet keeps them (`alias -> model`), read the other way round."""

from __future__ import annotations

from collections.abc import Mapping


def aliases_by_model(aliases: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """`alias -> model` inverted to `model -> its aliases, sorted`, in one pass: listing
    every model's aliases one model at a time reads the whole map once per model."""
    grouped: dict[str, list[str]] = {}
    for alias, model in sorted(aliases.items()):
        grouped.setdefault(model, []).append(alias)
    return {model: tuple(names) for model, names in grouped.items()}
