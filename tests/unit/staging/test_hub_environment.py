"""Hub settings: Xet high-performance mode on, hf_transfer called out as ignored."""

from __future__ import annotations

import logging

import pytest

from cluster.staging.hub_download import (
    DEFAULT_HUB_ENDPOINT,
    prepare_hub_environment,
    resolve_endpoint,
)


def test_xet_high_performance_mode_is_switched_on():
    env: dict[str, str] = {}
    assert prepare_hub_environment(env) == []
    assert env["HF_XET_HIGH_PERFORMANCE"] == "1"


def test_a_users_explicit_xet_setting_wins():
    env = {"HF_XET_HIGH_PERFORMANCE": "0"}
    prepare_hub_environment(env)
    assert env["HF_XET_HIGH_PERFORMANCE"] == "0"


def test_hf_transfer_is_reported_as_ignored_instead_of_pretending(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING):
        warnings = prepare_hub_environment({"HF_HUB_ENABLE_HF_TRANSFER": "1"})
    assert len(warnings) == 1
    assert "ignore" in warnings[0] and "hf_transfer" in warnings[0]
    assert warnings[0] in caplog.text


def test_the_endpoint_comes_from_config_then_hf_endpoint_then_the_public_hub():
    assert resolve_endpoint("http://mirror/", {"HF_ENDPOINT": "http://env"}) == "http://mirror"
    assert resolve_endpoint(None, {"HF_ENDPOINT": "http://env/"}) == "http://env"
    assert resolve_endpoint(None, {}) == DEFAULT_HUB_ENDPOINT
