"""One line for a pydantic `ValidationError`: the field, the value, what is allowed.

Every user-facing config (CLI flags, YAML sections, `switchyard bench`, the soak script) is
a pydantic model; this is the one place that turns its first problem into the one-line error
`UserInputError` promises, so all of them read alike and none echoes a secret.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError

_SECRET_WORDS = ("key", "token", "secret", "password")
"""A field whose name holds one of these never has its value echoed (a mistyped API key is
still an API key)."""

NameOf = Callable[[Sequence[str]], str]
"""Field path -> what the user typed for it (a flag, a dotted YAML path)."""


def dotted(section: str) -> NameOf:
    """Name fields `section.a.b` (or `a.b` without a section): a YAML or JSON path."""

    def name(loc: Sequence[str]) -> str:
        return ".".join([section, *loc] if section else loc) or section or "config"

    return name


def validation_line(exc: ValidationError, name_of: NameOf) -> str:
    """`WHERE: VALUE is not allowed (RULE)`, plus how many other problems there are.

    The value is left out for a check across fields (no location: its input is the whole
    config), a whole sub-config, and a secret's field."""
    problems = exc.errors()
    first = problems[0]
    loc = [str(part) for part in first["loc"]]
    where = name_of(loc)
    rule = str(first["msg"]).removeprefix("Value error, ")
    more = f"; {len(problems) - 1} more problem(s)" if len(problems) > 1 else ""
    value = first.get("input")
    if not where:
        return f"{rule}{more}"
    secret = any(word in part.lower() for part in loc for word in _SECRET_WORDS)
    if not loc or secret or isinstance(value, dict | list | tuple):
        return f"{where}: {rule}{more}"
    return f"{where}: {value!r} is not allowed ({rule}){more}"
