"""Engine settings checked against the installed vLLM, before anything touches the cluster.

The typed engine fields are checked by their pydantic model (domain/deployment_config.py);
what only the installed vLLM knows is checked here: parser names (read from vLLM's two
registries without importing it, `serve_apps/internals.py`), and the keys and
values under `engine.extra`, which must be fields of `AsyncEngineArgs` or `FrontendArgs` (the
two dataclasses Ray Serve LLM splits engine arguments into) with values of their types and
choices. The second needs vLLM imported, so it runs only when `extra` is set.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
import warnings
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, Literal

from domain.deployment_config import EngineConfig
from domain.exit_codes import UserInputError
from serve_apps.internals import vllm_parser_names


def check_engine_config(engine: EngineConfig, where: str) -> None:
    """Raise UserInputError (one line, naming `where` and the field) when the installed vLLM
    would refuse a setting of `engine`."""
    for field, kind in (("tool_call_parser", "tool"), ("reasoning_parser", "reasoning")):
        name = getattr(engine, field)
        if name is not None:
            known = parser_names(kind)
            if known and name not in known:
                raise UserInputError(
                    f"{where}: engine.{field}: {name!r} is not allowed (not a {kind} parser "
                    f"of the installed vLLM{_did_you_mean(name, known)})"
                )
    if engine.speculative_config is not None:
        problem = check_engine_arg("speculative_config", engine.speculative_config)
        if problem is not None:
            raise UserInputError(f"{where}: engine.speculative_config: {problem}")
    for key, value in engine.extra.items():
        problem = check_engine_arg(key, value)
        if problem is not None:
            raise UserInputError(f"{where}: engine.extra.{key}: {problem}")


def check_fleet_engines(models: Iterable[Any], where: str) -> None:
    """`check_engine_config` for every model of a fleet file."""
    for i, model in enumerate(models):
        check_engine_config(model.engine, f"{where}: model '{model.name}' (models[{i}])")


@cache
def parser_names(kind: Literal["tool", "reasoning"]) -> frozenset[str]:
    """The built-in parser names of the installed vLLM (empty when it is not installed)."""
    return vllm_parser_names(kind) or frozenset()


def check_engine_arg(name: str, value: Any) -> str | None:
    """None when `name: value` is an argument the installed vLLM accepts; else why not."""
    fields = _vllm_fields()
    if name not in fields:
        return f"not an argument of the installed vLLM{_did_you_mean(name, fields)}"
    annotation = fields[name]
    members = _members(annotation)
    types_ = members - {type(None)}
    if value is None:
        return None if type(None) in members else "null is not allowed"
    # YAML slips a lax pydantic would coerce ("true" for a bool, 8 for a str).
    if types_ == {bool} and not isinstance(value, bool):
        return f"{value!r} is not allowed (expected true or false)"
    if isinstance(value, bool) and bool not in types_ and Any not in types_:
        return f"{value!r} is not allowed (expected {annotation})"
    if isinstance(value, str) and not _accepts_text(types_):
        return f"{value!r} is not allowed (expected {annotation})"
    enums = [m for m in types_ if isinstance(m, type) and issubclass(m, enum.Enum)]
    if isinstance(value, str) and enums and str not in types_:
        # vLLM's config validators take enum names (AttentionBackendEnum[value.upper()]).
        allowed = {n.lower() for e in enums for n in e.__members__}
        allowed |= {str(m.value).lower() for e in enums for m in e} | {"auto"}
        if value.lower() in allowed:
            return None
        names = sorted(n for e in enums for n in e.__members__)
        return f"{value!r} is not allowed (one of {names})"
    return _validate(annotation, value)


@cache
def _vllm_fields() -> dict[str, Any]:
    import vllm.engine.arg_utils as arg_utils
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import FrontendArgs

    fields: dict[str, Any] = {}
    for cls in (AsyncEngineArgs, FrontendArgs):
        for field in dataclasses.fields(cls):
            annotation: Any = field.type
            if isinstance(annotation, str):  # a forward reference (quantization_config)
                try:
                    annotation = eval(annotation, vars(arg_utils))
                except NameError:
                    annotation = Any
            fields[field.name] = annotation
    return fields


def _members(annotation: Any) -> set[Any]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: set[Any] = set()
        for arg in typing.get_args(annotation):
            out |= _members(arg)
        return out
    return {annotation}


def _accepts_text(members: set[Any]) -> bool:
    return any(
        m is str
        or m is Any
        or typing.get_origin(m) is Literal
        or (isinstance(m, type) and issubclass(m, enum.Enum))
        for m in members
    )


def _validate(annotation: Any, value: Any) -> str | None:
    from pydantic import TypeAdapter, ValidationError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            TypeAdapter(annotation).validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-"))
            return f"{value!r} is not allowed ({(where + ': ') if where else ''}{first['msg']})"
        except Exception:  # an annotation pydantic cannot build a schema for (torch.dtype)
            return None
    return None


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""
