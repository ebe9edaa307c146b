"""The fleet manager: owns the desired state and performs every change, one at a time.

A plain class; `manager_actor()` runs it as a detached, named Ray actor on the head node.
Every operation is journaled step by step before it acts (see `journal.py`), admission runs
on every change, and a swap that fails after OLD was drained puts OLD back by itself.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cluster.fleet_metrics import DiscardFleetMetrics, FleetMetrics, SwapSubject
from cluster.journal import Journal
from cluster.model_deployer import DeployFailed, ModelDeployer
from cluster.node_probe.overrides import InventoryConfig
from domain.deployment_config import AcceleratorConfig, ModelDeploymentConfig
from domain.model_state import ModelState
from domain.operation import (
    OperationEvent,
    OperationKind,
    OperationResult,
    Outcome,
    SwapPhase,
    now,
)

log = logging.getLogger(__name__)

MANAGER_ACTOR_NAME = "switchyard-manager"


class ManagerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    state_dir: Path
    accelerator: AcceleratorConfig = AcceleratorConfig(kind="cpu")
    standin_memory_gib: float = Field(4.0, gt=0, description="planning memory of a CPU slot")
    drain_timeout_s: float = Field(120.0, gt=0, le=3600)
    deploy_timeout_s: float = Field(900.0, gt=0, le=24 * 3600)
    free_timeout_s: float = Field(180.0, gt=0, le=3600)
    warmup_timeout_s: float = Field(300.0, gt=0, le=3600)
    health_period_s: float = Field(
        5.0, gt=0, le=3600, description="how often running replicas are checked (degraded)"
    )
    inventory: InventoryConfig = InventoryConfig()
    """Probe settings and the operator's overrides of probed node values."""


class _Op:
    """Bookkeeping of the running operation: journal entries, events and phase timings."""

    def __init__(self, manager: FleetManager, kind: OperationKind, details: dict[str, Any]):
        self.id = uuid.uuid4().hex[:12]
        self.kind = kind
        self.details = details
        self.events: list[OperationEvent] = []
        self.phase_seconds: dict[str, float] = {}
        self._manager = manager
        self._phase: str | None = None
        self._phase_started = time.monotonic()
        self._started = self._phase_started
        # Swap metrics are labelled with both models; a dry run swaps nothing.
        self._swap = (
            SwapSubject(str(details["old"]), str(details["new"]))
            if kind is OperationKind.SWAP and not details.get("dry_run")
            else None
        )
        manager._journal.append(
            {
                "op_id": self.id,
                "event": "start",
                "kind": kind.value,
                "details": details,
                "at": now(),
            }
        )

    def phase(self, phase: SwapPhase | str, message: str) -> None:
        self._close_phase()
        self._phase = str(phase)
        self._phase_started = time.monotonic()
        # Journal first, then act: a restart knows this step may have begun.
        self._manager._journal.append(
            {"op_id": self.id, "event": "phase", "phase": self._phase, "at": now()}
        )
        self._manager._metrics.phase_started(self.kind.value, self._phase, self._swap)
        self.note(message)

    def note(self, message: str) -> None:
        event = OperationEvent(at=now(), phase=self._phase or "", message=message)
        self.events.append(event)
        log.info("[%s %s] %s", self.kind.value, self._phase, message)

    def _close_phase(self) -> None:
        if self._phase is not None:
            seconds = time.monotonic() - self._phase_started
            self.phase_seconds[self._phase] = self.phase_seconds.get(self._phase, 0.0) + seconds
            self._manager._metrics.phase_finished(self.kind.value, self._phase, seconds, self._swap)
            self.events.append(
                OperationEvent(
                    at=now(),
                    phase=self._phase,
                    message=f"{self._phase} took {seconds:.1f} s",
                    seconds=seconds,
                )
            )

    def end(self, outcome: Outcome, message: str) -> OperationResult:
        self._close_phase()
        self._phase = None
        self.note(message)
        self._manager._metrics.operation_finished(
            self.kind.value, outcome.value, time.monotonic() - self._started, self._swap
        )
        self._manager._journal.append(
            {
                "op_id": self.id,
                "event": "end",
                "outcome": outcome.value,
                "message": message,
                "phase_seconds": self.phase_seconds,
                "at": now(),
            }
        )
        return OperationResult(
            self.id,
            self.kind,
            outcome,
            message,
            list(self.events),
            dict(self.phase_seconds),
            dict(self.details),
        )


class FleetManager:
    def __init__(
        self,
        settings: ManagerSettings,
        registry: Any,
        deployer: ModelDeployer,
        journal: Journal,
        cluster: ClusterView,
        metrics: FleetMetrics | None = None,
    ) -> None:
        self._settings = settings
        self._metrics: FleetMetrics = metrics or DiscardFleetMetrics()
        self._registry = registry
        self._deployer = deployer
        self._journal = journal
        self._cluster = cluster
        self._lock = threading.Lock()
        self._current: _Op | None = None
        snapshot = journal.load_snapshot()
        self._models: dict[str, dict[str, Any]] = dict(snapshot.get("models", {}))
        self._aliases: dict[str, str] = dict(snapshot.get("aliases", {}))
        self._ready = threading.Event()

    # ------------------------------------------------------------------ queries
    def current(self) -> dict[str, Any] | None:
        op = self._current
        if op is None:
            return None
        return {
            "op_id": op.id,
            "kind": op.kind.value,
            "details": op.details,
            "events": [e.to_json() for e in op.events],
        }

    def events(self, since: int = 0) -> list[dict[str, Any]]:
        op = self._current
        return [] if op is None else [e.to_json() for e in op.events[since:]]

    def fleet(self) -> dict[str, Any]:
        return {"models": self._models, "aliases": self._aliases}

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def inventory(self) -> dict[str, Any]:
        """Every node's probed and overridden hardware, as admission sees it now."""
        report: dict[str, Any] = self._cluster.probe(self._settings).to_json()
        return report

    # ------------------------------------------------------------------ entry point
    def run(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one operation; the JSON result says done / rejected / rolled back."""
        kind = OperationKind(request["kind"])
        if not self._ready.wait(600):
            return self._refusal(kind, "the manager is still reconciling after a restart")
        # A short wait: the health watch holds the lock for a moment now and then.
        if not self._lock.acquire(timeout=2.0):
            running = self._current
            what = f"{running.kind.value} {running.details}" if running else "an operation"
            return self._refusal(
                kind,
                f"another change is running ({what}); changes never interleave, "
                "retry when it has finished",
            )
        try:
            if kind is OperationKind.ADD:
                config = ModelDeploymentConfig.model_validate(request["config"])
                return self._add(config, dry_run=bool(request.get("dry_run"))).to_json()
            if kind is OperationKind.SWAP:
                config = ModelDeploymentConfig.model_validate(request["config"])
                return self._swap(
                    request["old"], config, dry_run=bool(request.get("dry_run"))
                ).to_json()
            if kind is OperationKind.REMOVE:
                return self._remove(request["name"]).to_json()
            return self._set_alias(request["alias"], request["name"]).to_json()
        finally:
            self._current = None
            self._lock.release()

    def _refusal(self, kind: OperationKind, message: str) -> dict[str, Any]:
        self._metrics.operation_finished(kind.value, Outcome.REJECTED.value, 0.0, None)
        return OperationResult("-", kind, Outcome.REJECTED, message).to_json()

    def _begin(self, kind: OperationKind, details: dict[str, Any]) -> _Op:
        op = _Op(self, kind, details)
        self._current = op
        return op

    # ------------------------------------------------------------------ state
    def _save(self) -> None:
        self._journal.save_snapshot({"models": self._models, "aliases": self._aliases})

    def _record_model(self, config: ModelDeploymentConfig) -> None:
        self._models[config.name] = {"config": config.model_dump(mode="json"), "state": "ready"}
        for alias in config.aliases:
            self._aliases[alias] = config.name
        self._save()

    def _config_of(self, name: str) -> ModelDeploymentConfig:
        return ModelDeploymentConfig.model_validate(self._models[name]["config"])

    # ------------------------------------------------------------------ preflight
    def _preflight(
        self,
        op: _Op,
        config: ModelDeploymentConfig,
        *,
        freed: Mapping[str, int] | None,
        dry_run: bool = False,
    ) -> tuple[Path | None, list[str]]:
        """Stage NEW and run admission; returns (model dir, rejection reasons)."""
        from cluster.admission_gate import decide

        problems = self._name_problems(config)
        if problems:
            self._metrics.admission(False, ["name_conflict"])
            return None, problems
        try:
            if dry_run:
                # A dry run must not download weights: the config (and the safetensors index
                # for sizes) is all admission needs.
                op.note(f"reading the config of {config.source}")
                model_dir = self._cluster.config_only(config.source)
            else:
                op.note(f"staging {config.source}")
                model_dir = self._cluster.materialize(config.source)
        except Exception as exc:
            self._metrics.admission(False, ["staging_failed"])
            return None, [f"staging {config.source} failed: {exc}"]
        probed = self._cluster.probe(self._settings)
        for problem in probed.problems:
            op.note(f"inventory: {problem}")
        try:
            inventory = self._cluster.inventory(self._settings, probed)
        except ValueError as exc:  # no node with the fleet's accelerator kind
            return model_dir, [f"inventory: {exc}"]
        if dry_run:
            disk_problems = self._dry_run_disk(op, config, probed)
            if disk_problems:
                return model_dir, disk_problems
        try:
            decision = decide(model_dir, config, inventory, freed=freed)
        except ValueError as exc:  # unsupported architecture, invalid config
            self._metrics.admission(False, ["unsupported_model"])
            return model_dir, [str(exc)]
        candidate = decision.candidates[0] if decision.candidates else None
        codes = [r.code for r in decision.reasons]
        if not codes and candidate is not None and not decision.admitted:
            codes = [r.code for r in candidate.reasons]
        self._metrics.admission(decision.admitted, [] if decision.admitted else codes)
        op.details["admission"] = {
            "admitted": decision.admitted,
            "reasons": [str(r) for r in decision.reasons],
            "layout": str(config.layout),
            "candidate_reasons": [str(r) for r in candidate.reasons] if candidate else [],
        }
        if not decision.admitted:
            # The decision's reasons summarise the candidates (one per code); fall back to the
            # candidate's own when the decision gives none.
            reasons = [str(r) for r in decision.reasons]
            if not reasons and candidate is not None:
                reasons = [str(r) for r in candidate.reasons]
            return model_dir, reasons or ["the admission policy found no usable layout"]
        op.note(f"admitted {config.name} as {config.layout} ({len(inventory.nodes)} nodes)")
        return model_dir, []

    def _dry_run_disk(self, op: _Op, config: ModelDeploymentConfig, probed: Any) -> list[str]:
        """Report the weights' real size and each node's disk verdict; the problems (nodes
        where staging would refuse) make the dry run a rejection, as the real run would be."""
        from cluster.model_materializer import manager_staging_config
        from cluster.weight_disk_report import weights_disk_report

        try:
            report = weights_disk_report(
                config.source, probed.facts, manager_staging_config(self._settings.state_dir)
            )
        except Exception as exc:
            return [f"cannot size {config.source}: {exc}"]
        op.details["weights"] = report.to_json()
        op.note(
            f"weights of {config.source}: {report.weight_bytes / 2**30:.2f} GiB in "
            f"{report.files} files ({report.total_bytes / 2**30:.2f} GiB in all)"
        )
        for verdict in report.verdicts:
            op.note(f"disk: {verdict.describe()}")
        return [f"disk_insufficient: {v.describe()}" for v in report.verdicts if not v.fits]

    def _name_problems(self, config: ModelDeploymentConfig) -> list[str]:
        problems = []
        if config.name in self._models:
            problems.append(f"a model named '{config.name}' already exists")
        for alias in config.aliases:
            if alias in self._models:
                problems.append(f"alias '{alias}' is the name of a model")
        return problems

    # ------------------------------------------------------------------ add / remove / alias
    def _add(self, config: ModelDeploymentConfig, *, dry_run: bool) -> OperationResult:
        op = self._begin(
            OperationKind.ADD,
            {
                "name": config.name,
                "source": config.source,
                "layout": str(config.layout),
                "dry_run": dry_run,
            },
        )
        op.phase(SwapPhase.PREFLIGHT, f"admission for {config.name}")
        _, reasons = self._preflight(op, config, freed=None, dry_run=dry_run)
        if reasons:
            return op.end(Outcome.REJECTED, "not admitted: " + "; ".join(reasons))
        if dry_run:
            return op.end(
                Outcome.DONE,
                f"dry run: {config.name} would be admitted as {config.layout}; nothing changed",
            )
        op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {config.name}")
        try:
            result = self._deployer.deploy(config, timeout_s=self._settings.deploy_timeout_s)
            self._warm_up(config)
        except Exception as exc:
            self._deployer.remove(config.name)
            return op.end(Outcome.FAILED, f"{config.name} failed to start: {exc}")
        self._record_model(config)
        return op.end(Outcome.DONE, f"{config.name} is serving ({result.seconds:.1f} s)")

    def _remove(self, name: str) -> OperationResult:
        op = self._begin(OperationKind.REMOVE, {"name": name})
        if name not in self._models:
            return op.end(Outcome.REJECTED, f"no model named '{name}'")
        op.phase(SwapPhase.REMOVING_OLD, f"removing {name}")
        self._deployer.remove(name)
        del self._models[name]
        self._aliases = {a: m for a, m in self._aliases.items() if m != name}
        self._save()
        return op.end(Outcome.DONE, f"{name} removed")

    def _set_alias(self, alias: str, name: str) -> OperationResult:
        import ray

        op = self._begin(OperationKind.ALIAS, {"alias": alias, "name": name})
        if name not in self._models:
            return op.end(Outcome.REJECTED, f"no model named '{name}'")
        if alias in self._models:
            return op.end(Outcome.REJECTED, f"'{alias}' is a model name, not an alias")
        ray.get(self._registry.set_alias.remote(alias, name))
        self._aliases[alias] = name
        self._save()
        return op.end(Outcome.DONE, f"alias {alias} -> {name}")

    # ------------------------------------------------------------------ swap
    def _swap(self, old: str, new: ModelDeploymentConfig, *, dry_run: bool) -> OperationResult:
        import ray

        op = self._begin(
            OperationKind.SWAP,
            {
                "old": old,
                "new": new.name,
                "source": new.source,
                "layout": str(new.layout),
                "dry_run": dry_run,
                # All of NEW's config, journaled: a restart that completes the swap records
                # NEW as it was requested (engine settings included), not a copy of OLD.
                "new_config": new.model_dump(mode="json"),
            },
        )
        op.phase(SwapPhase.PREFLIGHT, f"admission for {new.name}, counting what {old} frees")
        if old not in self._models:
            return op.end(Outcome.REJECTED, f"no model named '{old}' to replace")
        old_config = self._config_of(old)
        moving = tuple(sorted(a for a, m in self._aliases.items() if m == old))
        new = new.model_copy(update={"aliases": tuple(dict.fromkeys((*new.aliases, *moving)))})
        freed = self._cluster.claimed_by(old_config)
        _, reasons = self._preflight(op, new, freed=freed, dry_run=dry_run)
        if reasons:
            return op.end(Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(reasons))
        if dry_run:
            return op.end(
                Outcome.DONE,
                f"dry run: {old} -> {new.name} as {new.layout} would be admitted; nothing changed",
            )

        op.phase(SwapPhase.DRAINING, f"holding {list(moving)} and draining {old}")
        ray.get(self._registry.set_held.remote(frozenset(moving)))
        ray.get(self._registry.set_state.remote(old, ModelState.DRAINING))
        left = self._cluster.drain(old, self._settings.drain_timeout_s)
        op.note(f"{old} drained ({left} requests still in flight at the deadline)")

        op.phase(SwapPhase.REMOVING_OLD, f"removing {old} and waiting for its accelerators")
        self._deployer.delete_app(old_config.app_name)
        if not self._cluster.wait_freed(old_config, freed, self._settings.free_timeout_s):
            op.note("the accelerators were not all seen free in time; deploying anyway")

        op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {new.name} ({new.layout})")
        deploy_config = new.model_copy(update={"aliases": ()})
        try:
            self._deployer.deploy(deploy_config, timeout_s=self._settings.deploy_timeout_s)
            op.note(f"{new.name} is running; warming it up with one real request")
            self._warm_up(new)
        except Exception as exc:
            error = str(exc)
            op.phase(SwapPhase.ROLLING_BACK, f"{new.name} failed: {error}")
            return self._roll_back(op, old_config, new, moving, error)

        op.phase(SwapPhase.SWITCHING, f"moving {list(moving)} to {new.name}")
        for alias in moving:
            ray.get(self._registry.set_alias.remote(alias, new.name))
        ray.get(self._registry.remove_model.remote(old, new.name))
        ray.get(self._registry.set_held.remote(frozenset()))
        del self._models[old]
        self._record_model(new)
        return op.end(Outcome.DONE, f"{old} replaced by {new.name}")

    def _roll_back(
        self,
        op: _Op,
        old_config: ModelDeploymentConfig,
        new: ModelDeploymentConfig,
        moving: tuple[str, ...],
        error: str,
    ) -> OperationResult:
        import ray

        self._deployer.delete_app(new.app_name)
        ray.get(self._registry.remove_model.remote(new.name, None))
        try:
            self._deployer.deploy(old_config, timeout_s=self._settings.deploy_timeout_s)
        except DeployFailed as exc:
            ray.get(self._registry.set_held.remote(frozenset()))
            return op.end(
                Outcome.FAILED,
                f"{new.name} failed ({error}) and {old_config.name} "
                f"could not be brought back: {exc}",
            )
        for alias in moving:
            ray.get(self._registry.set_alias.remote(alias, old_config.name))
        ray.get(self._registry.set_held.remote(frozenset()))
        return op.end(
            Outcome.ROLLED_BACK,
            f"rolled back to {old_config.name}: {new.name} failed to start: {error}",
        )

    def _warm_up(self, config: ModelDeploymentConfig) -> None:
        self._cluster.warm_up(config, self._settings.warmup_timeout_s)

    # ------------------------------------------------------------------ health
    def check_health(self) -> list[dict[str, str]]:
        """One pass of the health watch: a served model with no running replica (engine or
        node lost) becomes DEGRADED, and READY again once Serve has re-placed it. Journaled
        and published (the gateway answers 503 + Retry-After, `status` shows the reason).
        Skipped while an operation runs: it owns the states of the models it touches."""
        import ray

        from cluster.model_health import health_changes

        if not self._ready.is_set() or not self._lock.acquire(blocking=False):
            return []
        try:
            table = ray.get(self._registry.table.remote())
            published = {n: table.models[n].state for n in self._models if n in table.models}
            app_of = {n: self._config_of(n).app_name for n in self._models}
            changes = health_changes(published, app_of, self._cluster.running_replicas())
            for change in changes:
                error = change.reason if change.state is ModelState.DEGRADED else None
                ray.get(self._registry.set_state.remote(change.name, change.state, error))
                self._journal.append({"event": "health", **change.to_json(), "at": now()})
                log.warning("%s is %s: %s", change.name, change.state.value, change.reason)
            return [c.to_json() for c in changes]
        finally:
            self._lock.release()

    # ------------------------------------------------------------------ restart
    def reconcile(self) -> str:
        """Make Serve, the registry and the snapshot agree after a (re)start."""
        import ray

        try:
            unfinished = self._journal.unfinished()
            running = self._cluster.running_apps()
            message = "nothing to reconcile"
            if unfinished is not None and unfinished.get("kind") == OperationKind.SWAP.value:
                message = self._finish_swap(unfinished, running)
            elif unfinished is not None:
                message = f"{unfinished.get('kind')} {unfinished['op_id']} was interrupted"
                self._journal.append(
                    {
                        "op_id": unfinished["op_id"],
                        "event": "end",
                        "outcome": Outcome.FAILED.value,
                        "message": message,
                        "at": now(),
                    }
                )
            # Republish what the snapshot says serves (the registry may have restarted too).
            table = ray.get(self._registry.table.remote())
            running = self._cluster.running_apps()
            for name in self._models:
                config = self._config_of(name)
                published = name in table.models and table.models[name].state == ModelState.READY
                if not published and config.app_name in running:
                    ray.get(
                        self._registry.put_model.remote(
                            self._deployer.route(config, ModelState.READY)
                        )
                    )
            for alias, name in self._aliases.items():
                if table.aliases.get(alias) != name:
                    ray.get(self._registry.set_alias.remote(alias, name))
            if table.held_aliases and self._current is None:
                ray.get(self._registry.set_held.remote(frozenset()))
            log.info("reconciled: %s", message)
            return message
        finally:
            self._ready.set()

    def _finish_swap(self, entry: dict[str, Any], running: set[str]) -> str:
        """Complete the swap if NEW runs, else roll back to OLD. Journals which."""
        import ray

        details = entry.get("details", {})
        old, new_name = details.get("old"), details.get("new")
        phase = entry.get("phase")
        op_id = entry["op_id"]
        new_app = f"model-{new_name}"
        old_config = self._config_of(old) if old in self._models else None
        if phase == SwapPhase.SWITCHING.value or (
            phase == SwapPhase.DEPLOYING_NEW.value and new_app in running
        ):
            # NEW is up: finish forward. Its config is recorded once deployed.
            moving = sorted(a for a, m in self._aliases.items() if m == old)
            if new_name in self._models:
                # Killed after the switch recorded NEW (aliases already moved): keep it.
                recorded = self._config_of(new_name)
                new_config = recorded.model_copy(
                    update={"aliases": tuple(dict.fromkeys((*recorded.aliases, *moving)))}
                )
            elif "new_config" in details:
                requested = details["new_config"]
                new_config = ModelDeploymentConfig.model_validate(
                    {**requested, "aliases": list(dict.fromkeys([*requested["aliases"], *moving]))}
                )
            else:  # a journal written before NEW's config was journaled
                new_config = ModelDeploymentConfig.model_validate(
                    {
                        **(old_config.model_dump(mode="json") if old_config else {}),
                        "name": new_name,
                        "source": details.get("source"),
                        "aliases": moving,
                        "layout": _layout_from_text(details.get("layout", "")),
                    }
                )
            for alias in new_config.aliases:
                ray.get(self._registry.set_alias.remote(alias, new_name))
            ray.get(self._registry.set_state.remote(new_name, ModelState.READY))
            if old is not None:
                if old_config is not None:
                    self._deployer.delete_app(old_config.app_name)
                ray.get(self._registry.remove_model.remote(old, new_name))
                self._models.pop(old, None)
            self._record_model(new_config)
            outcome, message = (
                Outcome.DONE,
                (
                    f"swap {old} -> {new_name} interrupted in {phase}; {new_name} was running, "
                    "so the swap was completed"
                ),
            )
        else:
            # NEW may still be deploying (not RUNNING): remove it whatever its status, so it
            # neither holds accelerators nor shows up as a second model.
            if new_app in self._cluster.existing_apps():
                self._deployer.delete_app(new_app)
            table = ray.get(self._registry.table.remote())
            if new_name in table.models:
                ray.get(self._registry.remove_model.remote(new_name, None))
            if old_config is not None and old_config.app_name not in running:
                self._deployer.deploy(old_config, timeout_s=self._settings.deploy_timeout_s)
            elif old is not None:
                ray.get(self._registry.set_state.remote(old, ModelState.READY))
            outcome, message = (
                Outcome.ROLLED_BACK,
                (
                    f"swap {old} -> {new_name} interrupted in {phase}; {new_name} was not running, "
                    f"so {old} was kept"
                ),
            )
        ray.get(self._registry.set_held.remote(frozenset()))
        self._journal.append(
            {
                "op_id": op_id,
                "event": "end",
                "outcome": outcome.value,
                "message": message,
                "after_restart": True,
                "at": now(),
            }
        )
        return message


def _accelerator_resource(config: ModelDeploymentConfig) -> str:
    """The Ray resource a model's layout slots take: `GPU`, or the CPU stand-in resource."""
    if config.accelerator.kind == "gpu":
        return "GPU"
    return config.accelerator.standin_resource or "CPU"


def _layout_from_text(text: str) -> dict[str, Any]:
    import re

    match = re.fullmatch(r"TP(\d+)xPP(\d+)xDP(\d+)(\+EP)?", text)
    if match is None:
        return {}
    return {"tp": int(match[1]), "pp": int(match[2]), "dp": int(match[3]), "ep": bool(match[4])}


class ClusterView:
    """What the manager needs from the live cluster (Ray and Serve), kept in one place."""

    def __init__(self, registry: Any, materialize: Callable[[str], Path]) -> None:
        self._registry = registry
        self._materialize = materialize

    def materialize(self, source: str) -> Path:
        return self._materialize(source)

    def config_only(self, source: str) -> Path:
        """A directory with just what admission reads, without downloading weights."""
        import tempfile

        from domain.model_source import SourceKind, parse_model_source

        parsed = parse_model_source(source)
        if parsed.kind is not SourceKind.HUB:
            return self._materialize(source)  # local or generated: nothing to download
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        target = Path(tempfile.mkdtemp(prefix="switchyard-config-"))
        for name in ("config.json", "model.safetensors.index.json"):
            try:
                hf_hub_download(
                    parsed.repo_id or "", name, revision=parsed.revision, local_dir=target
                )
            except EntryNotFoundError:
                if name == "config.json":
                    raise
        return target

    def probe(self, settings: ManagerSettings) -> Any:
        """Probe every node (one Ray task each) and apply the operator's overrides."""
        from cluster.model_materializer import manager_staging_config
        from cluster.node_probe.ray_probe import probe_cluster

        return probe_cluster(
            manager_staging_config(settings.state_dir).cache_dir,
            settings.inventory,
            standin_resource=settings.accelerator.standin_resource,
            standin_memory_gib=settings.standin_memory_gib,
        )

    def inventory(self, settings: ManagerSettings, probed: Any = None) -> Any:
        """The policy's inventory from probed (and overridden) node facts."""
        from cluster.node_probe.policy_inventory import policy_inventory

        probed = probed if probed is not None else self.probe(settings)
        return policy_inventory(probed.facts, probed.available, settings.accelerator)

    def claimed_by(self, config: ModelDeploymentConfig) -> dict[str, int]:
        """Accelerators per node held by a model's placement groups (node ids cut to 12)."""
        from ray.util.placement_group import placement_group_table

        key = _accelerator_resource(config)
        claimed: dict[str, int] = {}
        for group in placement_group_table().values():
            if group.get("state") != "CREATED" or config.app_name not in group.get("name", ""):
                continue
            for index, bundle in group["bundles"].items():
                node = group["bundles_to_node_id"].get(index)
                if node and bundle.get(key):
                    claimed[node[:12]] = claimed.get(node[:12], 0) + int(bundle[key])
        return claimed

    def wait_freed(
        self, config: ModelDeploymentConfig, freed: Mapping[str, int], timeout_s: float
    ) -> bool:
        """Wait until the placement groups of `config` that held `freed` are gone."""
        key = _accelerator_resource(config)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            from ray._private.state import available_resources_per_node

            available = available_resources_per_node()  # type: ignore[no-untyped-call]
            if all(
                any(
                    node_id.startswith(node) and res.get(key, 0) >= count
                    for node_id, res in available.items()
                )
                for node, count in freed.items()
            ):
                return True
            time.sleep(0.5)
        return False

    def drain(self, name: str, timeout_s: float) -> int:
        """Wait until no gateway replica has a request in flight for `name`; returns what is
        left at the deadline."""
        import ray

        version = ray.get(self._registry.table.remote()).version
        deadline = time.monotonic() + timeout_s
        left = 0
        while time.monotonic() < deadline:
            count = ray.get(self._registry.in_flight.remote(name, version))
            if count == 0:
                return 0
            left = count if count is not None else left
            time.sleep(0.2)
        return left

    def existing_apps(self) -> set[str]:
        from ray import serve

        return set(serve.status().applications)

    def running_replicas(self) -> dict[str, int]:
        """Serve application -> replicas RUNNING now."""
        from ray import serve
        from ray.serve._private.common import ReplicaState

        return {
            name: sum(
                d.replica_states.get(ReplicaState.RUNNING, 0) for d in app.deployments.values()
            )
            for name, app in serve.status().applications.items()
        }

    def running_apps(self) -> set[str]:
        from ray import serve
        from ray.serve.schema import ApplicationStatus

        status = serve.status()
        return {n for n, a in status.applications.items() if a.status == ApplicationStatus.RUNNING}

    def warm_up(self, config: ModelDeploymentConfig, timeout_s: float) -> None:
        """One real request through the model's own handle, before any client sees it."""
        import concurrent.futures

        from ray import serve
        from ray.serve.llm.openai_api_models import CompletionRequest

        handle = serve.get_deployment_handle(config.deployment_name, config.app_name)
        request = CompletionRequest(model=config.name, prompt="Hello", max_tokens=1)

        def ask() -> Any:
            stream: Any = handle.options(stream=True).completions.remote(request, None)
            for item in stream:
                return item
            return None

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            reply = pool.submit(ask).result(timeout=timeout_s)
        error = getattr(reply, "error", None)
        if reply is None or error is not None:
            raise DeployFailed(f"warm-up request failed: {getattr(error, 'message', reply)}")
