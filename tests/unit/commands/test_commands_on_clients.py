"""The commands that read or change a running stack, on in-memory clients: `status` from the
registry's and the manager's views, `export`, `keys reload`, `apply` step by step, and one
operation's report. The same manager and registry logic answers as on Ray
(tests/support/memory_clients.py); only the transport is missing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.telemetry.status_publisher import ManagerStatusSource
from domain.exit_codes import ExitCode, UserInputError
from domain.fleet_file import parse_fleet_file
from domain.model_state import ModelState
from domain.operation import Outcome
from domain.operation_request import AddRequest, ParkRequest, RemoveRequest, WakeRequest
from domain.status_report import StatusReport
from domain.tenant_keys import KEYS_FILE_FACT, read_keys_file
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.registry.status_document import ENDPOINTS_FACT
from switchyard.commands.export import export
from switchyard.commands.keys import reload_keys
from switchyard.commands.status import status_report
from switchyard.fleet_file_apply import apply_fleet
from switchyard.operation_runner import report_operation
from tests.support.fleet_configs import OLD
from tests.support.memory_clients import MemoryManagerClient, MemoryRegistryClient
from tests.unit.fleet.conftest import Fleet

pytestmark = pytest.mark.unit

FILE = """
models:
  - name: mini-old
    source: miniature:llama
    aliases: [default]
    engine: {max_model_len: 512}
"""


@pytest.fixture
def registry() -> Iterator[MemoryRegistryClient]:
    client = MemoryRegistryClient(alive_nodes=frozenset({"head-node"}), running_replicas={})
    yield client
    client.close()


@pytest.fixture
def manager(fleet: Fleet) -> MemoryManagerClient:
    return MemoryManagerClient(fleet.engine)


def _keys_file(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "keys.yaml"
    entries = "".join(
        f"  - {{name: {n}, key_sha256: {hashlib.sha256(n.encode()).hexdigest()}}}\n" for n in names
    )
    path.write_text("keys:\n" + entries)
    return path


def test_status_reads_models_and_facts_from_the_registry_and_the_rest_from_the_manager(
    registry: MemoryRegistryClient, manager: MemoryManagerClient
) -> None:
    route = ModelRoute(
        "mini-old", "model-mini-old-g1", "mini-old", ModelState.READY, "miniature:llama", "tp=1"
    )
    registry.call(registry.registry.put_model(route))
    registry.call(registry.registry.set_alias("default", "mini-old"))
    registry.set_fact("endpoint", "http://127.0.0.1:8000")
    head = {"url": "http://127.0.0.1:8000", "node_id": "head-node", "head": True, "app": "gw"}
    registry.set_fact(ENDPOINTS_FACT, [head])

    status = status_report("127.0.0.1:6379", registry, manager)

    assert [(m.name, m.aliases, m.state, m.app) for m in status.models] == [
        ("mini-old", ["default"], "ready", "model-mini-old-g1")
    ]
    assert status.endpoint == "http://127.0.0.1:8000" and status.aliases == {"default": "mini-old"}
    (endpoint,) = status.endpoints
    assert endpoint.alive and endpoint.url == "http://127.0.0.1:8000/v1"
    assert endpoint.running_replicas == 0
    assert status.inventory == manager.engine.inventory() and status.tenants is None


def test_the_gateway_route_serves_the_same_document_from_the_manager_s_published_view(
    registry: MemoryRegistryClient, manager: MemoryManagerClient
) -> None:
    # What `status` reads over Ray and what the registry answers for the gateway's route
    # (from the view the manager published, with no Ray call) are one document.
    done = manager.run(AddRequest(config=OLD))
    assert done is not None and done.outcome is Outcome.DONE, done
    fleet_model = manager.engine.fleet().models[OLD.name]
    route = ModelRoute(
        OLD.name, fleet_model.app.app, OLD.name, ModelState.READY, OLD.source, str(OLD.layout)
    )
    registry.call(registry.registry.put_model(route))
    head = {"url": "http://127.0.0.1:8000", "node_id": "head-node", "head": True, "app": "gw"}
    registry.set_fact(ENDPOINTS_FACT, [head])
    published = manager.status().model_copy(
        update={"alive_nodes": ["head-node"], "running_replicas": {}}
    )
    registry.call(registry.registry.set_manager_status(published))

    over_ray = status_report("127.0.0.1:6379", registry, manager)
    through_gateway = StatusReport.model_validate(
        registry.call(registry.registry.status_document())
    )

    assert through_gateway.read_via == "gateway" and over_ray.read_via == "ray"
    volatile = {"read_via", "manager_status_age_s"}
    assert through_gateway.model_dump(exclude=volatile) == over_ray.model_dump(exclude=volatile)
    assert through_gateway.models[0].residency == "always"
    assert through_gateway.manager_status_age_s is not None


def test_the_route_s_document_before_the_manager_has_published_shows_the_registry_only(
    registry: MemoryRegistryClient,
) -> None:
    document = StatusReport.model_validate(registry.call(registry.registry.status_document()))
    assert document.inventory is None and document.manager_status_age_s is None
    assert document.read_via == "gateway"


def test_a_published_view_probes_the_nodes_again_only_after_a_change_or_a_minute(
    fleet: Fleet,
) -> None:
    probes: list[float] = []
    now = [1000.0]
    real_probe = fleet.engine.inventory

    def counting_probe() -> dict[str, Any]:
        probes.append(now[0])
        return real_probe()

    fleet.engine.inventory = counting_probe  # type: ignore[method-assign]
    source = ManagerStatusSource(
        fleet.engine, address="a:1", clock=lambda: now[0], inventory_max_age_s=60.0
    )
    for _ in range(3):
        source.take(fresh_inventory=False)
        now[0] += 10
    assert len(probes) == 1
    done = fleet.engine.run(AddRequest(config=OLD))
    assert done.outcome is Outcome.DONE, done
    source.take(fresh_inventory=False)
    assert len(probes) == 2  # the fleet changed
    now[0] += 61
    source.take(fresh_inventory=False)
    assert len(probes) == 3  # too old
    source.take(fresh_inventory=True)
    assert len(probes) == 4  # `status` over Ray always probes


def test_status_shows_a_parked_model_with_its_last_wake(
    registry: MemoryRegistryClient, manager: MemoryManagerClient
) -> None:
    for request in (
        AddRequest(config=OLD),
        ParkRequest(name=OLD.name),
        WakeRequest(name=OLD.name),
        ParkRequest(name=OLD.name),
    ):
        done = manager.run(request)
        assert done is not None and done.outcome is Outcome.DONE, done
    parked = manager.engine.fleet().models[OLD.name]
    route = ModelRoute(
        OLD.name, parked.app.app, OLD.name, ModelState.PARKED, OLD.source, str(OLD.layout)
    )
    registry.call(registry.registry.put_model(route))

    (model,) = status_report("127.0.0.1:6379", registry, manager).models

    assert model.state == "parked" and model.last_wake_s == parked.last_wake_s is not None
    assert (model.residency, model.park_mode) == ("always", "unload")
    assert model.model_dump(mode="json")["last_wake_s"] == parked.last_wake_s


def test_status_without_a_manager_still_shows_the_registry(
    registry: MemoryRegistryClient,
) -> None:
    status = status_report("127.0.0.1:6379", registry, None)
    assert status.models == [] and status.inventory is None and status.operation is None
    assert status.metrics.prometheus_service_discovery_file


def test_export_prints_a_fleet_file_that_names_the_live_models(
    manager: MemoryManagerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = parse_fleet_file(FILE, "fleet.yaml").models[0]
    added = manager.run(AddRequest(config=entry.deployment(), entry=entry))
    assert added is not None and added.outcome is Outcome.DONE, added

    assert export(manager) == ExitCode.OK

    exported = parse_fleet_file(capsys.readouterr().out, "exported.yaml")
    assert [m.written() for m in exported.models] == [entry.written()]


def test_keys_reload_publishes_a_table_and_says_which_keys(
    registry: MemoryRegistryClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = read_keys_file(_keys_file(tmp_path, "alice", "bob"), {})
    assert reload_keys(registry, table, as_json=True) == ExitCode.OK
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"version": table.version, "source": table.source, "keys": ["alice", "bob"]}
    assert registry.view().tenants == table


def test_keys_reload_without_a_file_rereads_the_one_up_named(
    registry: MemoryRegistryClient, tmp_path: Path
) -> None:
    with pytest.raises(UserInputError, match="not started with `up --keys`"):
        reload_keys(registry, None, as_json=True)
    registry.set_fact(KEYS_FILE_FACT, str(_keys_file(tmp_path, "carol")))
    assert reload_keys(registry, None, as_json=True) == ExitCode.OK
    published = registry.view().tenants
    assert published is not None and [t.name for t in published.tenants] == ["carol"]


def test_keys_reload_of_an_older_table_is_refused(
    registry: MemoryRegistryClient, tmp_path: Path
) -> None:
    older = read_keys_file(_keys_file(tmp_path, "alice"), {})
    newer = read_keys_file(_keys_file(tmp_path, "bob"), {})
    reload_keys(registry, newer, as_json=True)
    with pytest.raises(UserInputError, match="a newer tenant table"):
        reload_keys(registry, older, as_json=True)
    published = registry.view().tenants
    assert published is not None and [t.name for t in published.tenants] == ["bob"]


def test_apply_runs_each_step_journals_it_and_publishes_the_files_keys(
    manager: MemoryManagerClient,
    registry: MemoryRegistryClient,
    fleet: Fleet,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    desired = parse_fleet_file(FILE, "fleet.yaml")
    tenants = read_keys_file(_keys_file(tmp_path, "alice"), {})

    code = apply_fleet(
        manager,
        lambda: registry,
        Path("fleet.yaml"),
        desired,
        "ab" * 32,
        tenants=tenants,
        dry_run=False,
        as_json=True,
    )

    assert code == ExitCode.OK
    report = json.loads(capsys.readouterr().out)
    assert report["done"] and [s["outcome"] for s in report["steps"]] == ["done"]
    assert set(manager.fleet().models) == {"mini-old"}
    assert registry.view().tenants == tenants
    phases = [e.get("phase") for e in fleet.journal.entries() if e.get("event") == "apply"]
    assert phases == ["start", "end"]


def test_a_dry_run_changes_nothing_and_never_asks_for_the_registry(
    manager: MemoryManagerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_registry() -> MemoryRegistryClient:
        raise AssertionError("a dry run publishes no keys")

    desired = parse_fleet_file(FILE, "fleet.yaml")
    code = apply_fleet(
        manager,
        no_registry,
        Path("fleet.yaml"),
        desired,
        "ab" * 32,
        tenants=None,
        dry_run=True,
        as_json=True,
    )
    assert code == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["steps"] == []
    assert manager.fleet().models == {}


def test_an_operation_prints_its_events_and_exits_by_its_outcome(
    manager: MemoryManagerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_operation(manager, AddRequest(config=OLD), as_json=False) == ExitCode.OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("done: ") and len(lines) > 2

    refused = report_operation(manager, RemoveRequest(name="nope"), as_json=True)
    assert refused != ExitCode.OK
    assert json.loads(capsys.readouterr().out)["outcome"] != "done"


def test_a_manager_that_dies_during_an_operation_is_reported_not_hung_on(
    manager: MemoryManagerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    manager.dies_during.add("add")
    assert report_operation(manager, AddRequest(config=OLD), as_json=False) == ExitCode.REJECTED
    assert "the manager died during the operation" in capsys.readouterr().out


def test_apply_changes_a_models_residency_without_redeploying_it(
    manager: MemoryManagerClient,
    registry: MemoryRegistryClient,
    fleet: Fleet,
    capsys: pytest.CaptureFixture[str],
) -> None:
    desired = parse_fleet_file(FILE, "fleet.yaml")
    apply_fleet(
        manager,
        lambda: registry,
        Path("f"),
        desired,
        "ab" * 32,
        tenants=None,
        dry_run=False,
        as_json=True,
    )
    capsys.readouterr()
    on_demand = parse_fleet_file(FILE + "    residency: on_demand\n", "fleet.yaml")

    code = apply_fleet(
        manager,
        lambda: registry,
        Path("f"),
        on_demand,
        "cd" * 32,
        tenants=None,
        dry_run=False,
        as_json=True,
    )

    assert code == ExitCode.OK
    report = json.loads(capsys.readouterr().out)
    assert [(s["action"], s["outcome"]) for s in report["steps"]] == [("residency", "done")]
    assert manager.fleet().models["mini-old"].requested.residency.value == "on_demand"
    assert fleet.cluster.serve.deployed == ["model-mini-old-g1"], "nothing redeployed"
    exported = [e.written() for e in manager.export_fleet()]
    assert exported[0]["residency"] == "on_demand"
