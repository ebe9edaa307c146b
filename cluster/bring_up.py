"""Bringing one deployment up: placement check, LOADING, deploy, warm-up."""

from __future__ import annotations

from pathlib import Path

from cluster.cluster_port import DeployFailed, PlacementRefused
from cluster.fleet_context import FleetContext, model_route
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState


def bring_up(
    ctx: FleetContext, app: AppName, config: ModelDeploymentConfig, model_dir: Path
) -> None:
    """Deploy `config` as `app` and warm it with one real request, LOADING meanwhile.

    Clients see nothing of it until the caller publishes it READY. The app's generation is
    saved first, so no later deployment reuses its name. Raises DeployFailed with the app
    deleted and the route FAILED (a refused placement leaves no route at all)."""
    ctx.desired.update(ctx.desired.state.with_generation(app))
    problem = ctx.ports.serve.placement_problem(config)
    if problem is not None:
        raise PlacementRefused(f"{config.name} ({config.layout}) cannot be placed: {problem}")
    ctx.ports.routes.put_route(model_route(app, config, ModelState.LOADING))
    try:
        ctx.ports.serve.deploy(app, config, model_dir, ctx.settings.deploy_timeout_s)
        ctx.ports.serve.warm_up(app, ctx.settings.warmup_timeout_s)
    except DeployFailed as exc:
        ctx.ports.serve.delete(app.app)
        ctx.ports.routes.set_route_state(config.name, ModelState.FAILED, str(exc))
        raise
