"""Every config error is one line naming the field, the value and the rule, never a secret."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from domain.validation_message import dotted, validation_line


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tp: int = Field(1, ge=1)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int = Field(8000, ge=1, le=65535)
    api_key: str = Field("", min_length=0, max_length=4)
    inner: Inner = Inner()

    @model_validator(mode="after")
    def _key_needs_port(self) -> Settings:
        if self.api_key and self.port == 1:
            raise ValueError("--api-key cannot be used with --port 1")
        return self


def _error(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate(values)
    return caught.value


def test_the_line_names_the_field_the_value_and_the_rule() -> None:
    line = validation_line(_error(port=0), dotted("stack"))
    assert line == "stack.port: 0 is not allowed (Input should be greater than or equal to 1)"


def test_a_nested_field_is_named_by_its_path() -> None:
    assert validation_line(_error(inner={"tp": 0}), dotted("")).startswith(
        "inner.tp: 0 is not allowed"
    )


def test_more_problems_are_counted_not_listed() -> None:
    assert validation_line(_error(port=0, inner={"tp": 0}), dotted("")).endswith(
        "; 1 more problem(s)"
    )


def test_a_secret_fields_value_is_never_echoed() -> None:
    line = validation_line(_error(api_key="sk-long-secret"), dotted(""))
    assert line.startswith("api_key: ")
    assert "sk-long" not in line


def test_a_whole_sub_config_is_not_echoed() -> None:
    line = validation_line(_error(inner=[1, 2]), dotted(""))
    assert line.startswith("inner: ") and "[1, 2]" not in line


def test_a_check_across_fields_keeps_its_own_words_and_hides_the_config() -> None:
    error = _error(api_key="k", port=1)
    assert validation_line(error, lambda loc: ".".join(loc)) == (
        "--api-key cannot be used with --port 1"
    )
    assert validation_line(error, dotted("stack")) == (
        "stack: --api-key cannot be used with --port 1"
    )


def test_flags_can_stand_for_fields() -> None:
    line = validation_line(_error(port=70000), lambda loc: "--" + "-".join(loc))
    assert line.startswith("--port: 70000 is not allowed")
