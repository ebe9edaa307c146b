"""Switchyard's Ray Serve settings: what a started head gets, and the operator's word wins."""

from __future__ import annotations

from cluster.startup.serve_tuning import SERVE_TUNING_ENV, with_serve_tuning


def test_a_started_head_gets_grpc_streaming_and_keeps_one_proxy_port() -> None:
    env = with_serve_tuning({"PATH": "/bin"})
    assert env["RAY_SERVE_USE_GRPC_BY_DEFAULT"] == "1"
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "0"
    assert env["PATH"] == "/bin"


def test_the_router_keeps_its_own_loop_for_the_threaded_manager() -> None:
    assert SERVE_TUNING_ENV["RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP"] == "1"


def test_serving_workers_run_at_the_priority_of_rays_daemons() -> None:
    # Ray's default (15) lets every Ray daemon take the CPU from a CPU-bound engine first.
    assert with_serve_tuning({})["RAY_worker_niceness"] == "0"


def test_a_value_the_operator_set_is_kept() -> None:
    env = with_serve_tuning({"RAY_SERVE_USE_GRPC_BY_DEFAULT": "0"})
    assert env["RAY_SERVE_USE_GRPC_BY_DEFAULT"] == "0"


def test_switchyard_heads_are_tuned_unless_a_baseline_asks_for_rays_defaults() -> None:
    from cluster.startup.ray_runtime import LocalHeadConfig

    assert LocalHeadConfig().serve_tuning
    assert not LocalHeadConfig(serve_tuning=False).serve_tuning
