"""The staging config: one validated model, units in names, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.staging.staging_config import (
    GIB,
    StagingConfig,
    StagingMode,
    default_cache_dir,
    load_staging_config,
)
from domain.exit_codes import UserInputError


def test_defaults_download_once_to_a_shared_cache_and_never_evict(tmp_path: Path):
    config = load_staging_config({"cache_dir": tmp_path})
    assert config.mode is StagingMode.SHARED
    assert config.allow_eviction is False
    assert config.verify_sha256 is True
    assert config.reserve_bytes == int(config.reserve_gib * GIB)


def test_unknown_fields_are_refused_with_the_field_named(tmp_path: Path):
    with pytest.raises(UserInputError, match="reserve_gb"):
        load_staging_config({"cache_dir": tmp_path, "reserve_gb": 10})


def test_a_negative_reserve_is_refused_with_field_value_and_rule(tmp_path: Path):
    with pytest.raises(UserInputError) as caught:
        load_staging_config({"cache_dir": tmp_path, "reserve_gib": -1})
    message = str(caught.value)
    assert "staging.reserve_gib" in message and "-1" in message and "greater than" in message


def test_an_unknown_mode_is_refused(tmp_path: Path):
    with pytest.raises(UserInputError, match=r"staging\.mode"):
        load_staging_config({"cache_dir": tmp_path, "mode": "everywhere"})


def test_a_hub_endpoint_must_be_an_http_url(tmp_path: Path):
    with pytest.raises(UserInputError, match="hub_endpoint"):
        load_staging_config({"cache_dir": tmp_path, "hub_endpoint": "ftp://mirror"})
    config = load_staging_config({"cache_dir": tmp_path, "hub_endpoint": "http://mirror:8080/"})
    assert config.hub_endpoint == "http://mirror:8080"


def test_the_cache_dir_is_made_absolute():
    assert StagingConfig(cache_dir=Path("relative/cache")).cache_dir.is_absolute()


def test_the_default_cache_dir_follows_the_environment(tmp_path: Path):
    assert default_cache_dir({"SWITCHYARD_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert default_cache_dir({}).name == "switchyard"
