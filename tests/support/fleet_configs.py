"""The two models of the fleet engine's swap tests: OLD serves `default`, NEW replaces it."""

from __future__ import annotations

from domain.deployment_config import AcceleratorConfig, EngineConfig, ModelDeploymentConfig

CPU = AcceleratorConfig(kind="cpu")
OLD = ModelDeploymentConfig(
    name="mini-old",
    source="miniature:llama",
    aliases=("default",),
    accelerator=CPU,
    engine=EngineConfig(enforce_eager=True, max_model_len=512),
)


def new_model(source: str) -> ModelDeploymentConfig:
    """NEW differs from OLD in an engine setting, so a restart that rebuilds NEW's record
    from OLD's config is caught."""
    return ModelDeploymentConfig(
        name="mini-new",
        source=source,
        accelerator=CPU,
        engine=EngineConfig(enforce_eager=True, max_model_len=256),
    )
