"""The miniatures Switchyard can write, by name."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from cluster.miniature_generator import kimi_k25, llama, minimax_m25
from cluster.miniature_generator.recipe import MiniatureRecipe
from domain.exit_codes import UserInputError

MINIATURES: Mapping[str, MiniatureRecipe] = MappingProxyType(
    {recipe.name: recipe for recipe in (kimi_k25.recipe(), minimax_m25.recipe(), llama.recipe())}
)


def recipe_for(name: str) -> MiniatureRecipe:
    """The recipe called `name`; an unknown name is the caller's input error."""
    try:
        return MINIATURES[name]
    except KeyError:
        allowed = ", ".join(MINIATURES)
        raise UserInputError(f"miniature name {name!r} is unknown; allowed: {allowed}") from None


def check_seed(seed: int) -> int:
    """Seeds feed numpy's generator, which takes non-negative integers only."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserInputError(f"seed {seed!r} is not allowed; use an integer 0 or greater")
    return seed
