"""ManagerSettings validation (no engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cluster.fleet.manager_settings import ManagerSettings
from domain.deployment_config import AcceleratorConfig


class TestManagerSettings:
    def test_defaults(self, tmp_path: Path) -> None:
        settings = ManagerSettings(state_dir=tmp_path)
        assert settings.state_dir == tmp_path
        assert settings.accelerator == AcceleratorConfig(kind="cpu")
        assert settings.standin_memory_gib == 4.0
        assert settings.drain_timeout_s == 120.0
        assert settings.deploy_timeout_s == 900.0
        assert settings.free_timeout_s == 180.0
        assert settings.warmup_timeout_s == 300.0

    def test_state_dir_is_required(self) -> None:
        with pytest.raises(ValidationError):
            ManagerSettings.model_validate({})

    def test_state_dir_from_string(self, tmp_path: Path) -> None:
        settings = ManagerSettings.model_validate({"state_dir": str(tmp_path)})
        assert settings.state_dir == tmp_path

    def test_extra_fields_are_forbidden(self, tmp_path: Path) -> None:
        with pytest.raises(ValidationError, match="drain_timeout"):
            ManagerSettings.model_validate({"state_dir": tmp_path, "drain_timeout": 5})

    def test_frozen(self, tmp_path: Path) -> None:
        settings = ManagerSettings(state_dir=tmp_path)
        with pytest.raises(ValidationError):
            settings.drain_timeout_s = 1.0  # type: ignore[misc]

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("drain_timeout_s", 0),
            ("drain_timeout_s", -1.0),
            ("drain_timeout_s", 3601.0),
            ("deploy_timeout_s", 0),
            ("deploy_timeout_s", 24 * 3600 + 1),
            ("free_timeout_s", -5),
            ("free_timeout_s", 3600.5),
            ("warmup_timeout_s", 0),
            ("warmup_timeout_s", 7200),
            ("standin_memory_gib", 0),
            ("standin_memory_gib", -1.0),
            ("drain_timeout_s", "soon"),
        ],
    )
    def test_bad_values_are_refused(self, tmp_path: Path, field: str, value: Any) -> None:
        with pytest.raises(ValidationError, match=field):
            ManagerSettings.model_validate({"state_dir": tmp_path, field: value})

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("drain_timeout_s", 3600),
            ("deploy_timeout_s", 24 * 3600),
            ("free_timeout_s", 0.5),
            ("warmup_timeout_s", 3600),
        ],
    )
    def test_limits_are_inclusive(self, tmp_path: Path, field: str, value: float) -> None:
        settings = ManagerSettings.model_validate({"state_dir": tmp_path, field: value})
        assert getattr(settings, field) == value

    def test_accelerator_is_validated(self, tmp_path: Path) -> None:
        with pytest.raises(ValidationError):
            ManagerSettings.model_validate({"state_dir": tmp_path, "accelerator": {"kind": "tpu"}})
        settings = ManagerSettings.model_validate(
            {"state_dir": tmp_path, "accelerator": {"kind": "gpu"}}
        )
        assert settings.accelerator.kind == "gpu"
