"""What the fleet manager reports to its metrics sink: every phase with its duration and,
for swaps, both models; every operation's outcome; admission decisions by reason code; and
accelerators per node from Ray's resource tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.fleet.fleet_metrics import NodeUsage, RecordingFleetMetrics, SwapSubject
from cluster.fleet.journal import Journal
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.telemetry.gauge_sampler import accelerator_resource, node_usage
from cluster.telemetry.ray_fleet_metrics import RayFleetMetrics
from domain.deployment_config import AcceleratorConfig, ModelDeploymentConfig
from domain.metric_names import Kind, MetricSpec
from domain.model_state import ModelState
from domain.operation import OperationDetails, OperationKind, Outcome, SwapPhase
from domain.operation_request import AddRequest
from tests.support.memory_cluster import MemoryCluster
from tests.unit.fleet.conftest import Fleet


def recorder(
    tmp_path: Path, metrics: RecordingFleetMetrics, kind: OperationKind, details: OperationDetails
) -> OperationRecorder:
    return OperationRecorder(Journal(tmp_path / "manager"), metrics, kind, details)


def test_a_swap_reports_each_phase_with_both_models_and_its_outcome(tmp_path: Path) -> None:
    metrics = RecordingFleetMetrics()
    details = OperationDetails(old="kimi", new="minimax", dry_run=False)
    op = recorder(tmp_path, metrics, OperationKind.SWAP, details)
    op.phase(SwapPhase.PREFLIGHT, "admission")
    op.phase(SwapPhase.DRAINING, "holding")
    op.end(Outcome.DONE, "replaced")
    subject = SwapSubject("kimi", "minimax")
    assert metrics.started == [
        ("swap", "preflight", subject),
        ("swap", "draining", subject),
    ]
    assert [(k, p, s) for k, p, _, s in metrics.phases] == [
        ("swap", "preflight", subject),
        ("swap", "draining", subject),
    ]
    assert all(seconds >= 0 for _, _, seconds, _ in metrics.phases)
    ((kind, outcome, seconds, swap),) = metrics.operations
    assert (kind, outcome, swap) == ("swap", "done", subject)
    assert seconds >= sum(s for _, _, s, _ in metrics.phases)


def test_a_dry_run_swap_is_not_labelled_as_a_swap_of_two_models(tmp_path: Path) -> None:
    metrics = RecordingFleetMetrics()
    details = OperationDetails(old="kimi", new="minimax", dry_run=True)
    op = recorder(tmp_path, metrics, OperationKind.SWAP, details)
    op.phase(SwapPhase.PREFLIGHT, "admission")
    op.end(Outcome.DONE, "dry run")
    assert metrics.started == [("swap", "preflight", None)]
    assert metrics.operations[0][3] is None


def test_a_refused_change_counts_as_rejected(tmp_path: Path) -> None:
    metrics = RecordingFleetMetrics()
    fleet = Fleet(tmp_path / "state", MemoryCluster(tmp_path / "nodes"), metrics=metrics)
    fleet.engine._lock.acquire()
    fleet.engine.run(AddRequest(config=ModelDeploymentConfig(name="a", source="miniature:x")))
    assert metrics.operations == [("add", "rejected", 0.0, None)]


def test_a_name_conflict_is_an_admission_rejection_with_its_reason(tmp_path: Path) -> None:
    metrics = RecordingFleetMetrics()
    fleet = Fleet(tmp_path / "state", MemoryCluster(tmp_path / "nodes"), metrics=metrics)
    config = ModelDeploymentConfig(name="kimi", source="miniature:kimi-k2.5")
    assert fleet.engine.run(AddRequest(config=config)).outcome is Outcome.DONE
    metrics.admissions.clear()
    again = fleet.engine.run(AddRequest(config=config))
    assert again.outcome is Outcome.REJECTED
    assert metrics.admissions == [(False, ("name_conflict",))]


@pytest.mark.parametrize(
    ("accelerator", "resource"),
    [(AcceleratorConfig(kind="gpu"), "GPU"), (AcceleratorConfig(kind="cpu"), "accel_slot")],
)
def test_the_accelerator_resource_follows_the_cluster_kind(
    accelerator: AcceleratorConfig, resource: str
) -> None:
    assert accelerator_resource(accelerator) == resource


def test_node_usage_is_total_minus_available_and_disk_only_where_measured() -> None:
    """Disk figures go to the nodes on the manager's machine (`local_nodes`), whose cache
    the manager measured; a node elsewhere has none."""
    head, worker, cpu_only = "a" * 40, "b" * 40, "c" * 40
    totals = {
        head: {"GPU": 8.0, "CPU": 64.0},
        worker: {"GPU": 4.0},
        cpu_only: {"CPU": 16.0},
    }
    available = {head: {"GPU": 2.0}, worker: {"GPU": 4.0}, cpu_only: {"CPU": 16.0}}
    usage = node_usage(
        totals, available, "GPU", local_nodes={head}, staged_bytes=123, disk_free_bytes=456
    )
    assert [(u.node, u.accelerators, u.accelerators_claimed) for u in usage] == [
        ("a" * 12, 8, 6),
        ("b" * 12, 4, 0),
    ]
    assert (usage[0].staged_bytes, usage[0].disk_free_bytes) == (123, 456)
    assert (usage[1].staged_bytes, usage[1].disk_free_bytes) == (None, None)


def test_a_data_node_on_the_managers_machine_gets_its_disk_figures() -> None:
    """A fault-tolerant head holds no accelerator: its data node, beside it, has the row."""
    head, data = "a" * 40, "d" * 40
    totals = {head: {"CPU": 8.0}, data: {"accel_slot": 4.0}}
    usage = node_usage(
        totals,
        {data: {"accel_slot": 3.0}},
        "accel_slot",
        local_nodes={head, data},
        staged_bytes=123,
        disk_free_bytes=456,
    )
    assert [(u.node, u.accelerators_claimed, u.staged_bytes, u.disk_free_bytes) for u in usage] == [
        ("d" * 12, 1, 123, 456)
    ]


class _Instrument:
    """Stands in for a `ray.util.metrics` instrument: keeps what each call sent."""

    def __init__(self, spec: MetricSpec, sent: list[tuple[str, float, dict[str, str]]]) -> None:
        self.spec, self._sent = spec, sent

    def set(self, value: float, tags: dict[str, str]) -> None:
        self._sent.append((self.spec.name, value, tags))

    def inc(self, value: float, tags: dict[str, str]) -> None:
        self._sent.append((self.spec.name, value, tags))

    def observe(self, value: float, tags: dict[str, str]) -> None:
        self._sent.append((self.spec.name, value, tags))


def test_every_gauge_it_has_set_is_sent_again_on_each_refresh() -> None:
    """Ray forgets a gauge not set again within two export intervals; a gauge set once (the
    latest staging's download bytes was) leaves Prometheus before the dashboard shows it."""
    sent: list[tuple[str, float, dict[str, str]]] = []
    created: list[MetricSpec] = []

    def instrument(spec: MetricSpec) -> Any:
        created.append(spec)
        return _Instrument(spec, sent)

    metrics = RayFleetMetrics(instrument)
    swap = SwapSubject("kimi", "minimax")
    metrics.phase_started("swap", "preflight", swap)
    metrics.phase_finished("swap", "preflight", 1.5, swap)
    metrics.alias_unavailability(swap, {"default": 0.25})
    metrics.node_staging("node-a", "downloaded", 4096)
    metrics.fleet({"kimi": ModelState.READY}, {"default": "kimi"})
    metrics.nodes([NodeUsage("node-a", 8, 4, staged_bytes=4096, disk_free_bytes=1 << 30)])
    metrics.kv_prediction({"kimi": 0.97})
    metrics.wake_predicted("kimi", "level_1", 4.1, 4.4)
    gauges = {spec.name for spec in created if spec.kind == Kind.GAUGE}
    assert {name for name, _, _ in sent if name in gauges} == gauges
    last = {(name, tuple(sorted(tags.items()))): value for name, value, tags in sent}
    last = {key: value for key, value in last.items() if key[0] in gauges}

    sent.clear()
    metrics.refresh()

    assert {(name, tuple(sorted(tags.items()))): value for name, value, tags in sent} == last
