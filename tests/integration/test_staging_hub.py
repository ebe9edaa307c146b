"""Staging through huggingface_hub's real download path, against a local Hub on 127.0.0.1.

Covers: manifest before download, resume after a dropped connection and after a killed
process, a wrong size and a wrong hash, a full disk, two stagings racing for the last space,
and eviction that never touches a serving or pinned model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.staging.cache_entries import EntryState, entry_state, list_entries, pin
from cluster.staging.cache_layout import CacheLayout, entry_name_for
from cluster.staging.manifest import fetch_manifest
from cluster.staging.stage import check_disk, stage
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import (
    HubUnreachableError,
    InsufficientDiskError,
    IntegrityError,
)
from domain.exit_codes import UserInputError
from domain.model_source import parse_model_source
from tests.support.waiting import wait_until

from .local_hub import LocalHub
from .small_volume import small_volume
from .tiny_hub_model import REPO, SHARD_1, SHARD_2, tiny_model_files

REPO_ROOT = Path(__file__).resolve().parents[2]
MIB = 1024**2


@pytest.fixture
def hub() -> Iterator[LocalHub]:
    with LocalHub() as local_hub:
        yield local_hub


def config_for(cache_dir: Path, hub: LocalHub, **overrides: object) -> StagingConfig:
    settings: dict[str, object] = {
        "cache_dir": cache_dir,
        "reserve_gib": 0,
        "hub_endpoint": hub.url,
        "progress_interval_s": 0.5,
        **overrides,
    }
    return StagingConfig.model_validate(settings)


def run_child(source: str, config: StagingConfig, **extra: object) -> subprocess.Popen[str]:
    request = {"source": source, "config": json.loads(config.model_dump_json()), **extra}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.staging_child", json.dumps(request)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---- the ordinary path ----


def test_the_manifest_lists_files_sizes_and_hashes_before_anything_is_downloaded(hub: LocalHub):
    files = tiny_model_files()
    repo = hub.add_repo(REPO, files)
    manifest = fetch_manifest(parse_model_source(REPO), endpoint=hub.url)
    assert manifest.commit == repo.commit
    assert manifest.total_bytes == sum(
        len(content) for path, content in files.items() if path != "pytorch_model.bin"
    )
    assert manifest.skipped_files == ("pytorch_model.bin",)
    hashed = {item.path for item in manifest.files if item.sha256}
    assert hashed == {SHARD_1, SHARD_2, "tokenizer.json"}
    assert hub.resolve_requests(REPO) == [], "no file was touched to size the model"


def test_a_staged_model_is_a_verified_directory_and_a_second_staging_reuses_it(
    hub: LocalHub, tmp_path: Path
):
    files = tiny_model_files()
    hub.add_repo(REPO, files)
    config = config_for(tmp_path, hub)
    staged = stage(parse_model_source(REPO), config, node="node-a")
    assert not staged.reused
    assert staged.downloaded_bytes == staged.manifest.total_bytes
    for item in staged.manifest.files:
        assert (staged.path / item.path).read_bytes() == files[item.path]
    assert not (staged.path / "pytorch_model.bin").exists()
    assert entry_state(CacheLayout(tmp_path), staged.entry or "") is EntryState.STAGED

    downloads_before = len(hub.downloads(REPO))
    again = stage(parse_model_source(f"{REPO}@main"), config, node="node-a")
    assert again.reused and again.path == staged.path
    assert len(hub.downloads(REPO)) == downloads_before


def test_hf_endpoint_from_the_environment_is_honoured(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    hub.add_repo(REPO, tiny_model_files())
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    config = StagingConfig(cache_dir=tmp_path, reserve_gib=0)
    assert config.hub_endpoint is None
    staged = stage(parse_model_source(REPO), config)
    assert hub.downloads(REPO), "files came from the local hub named by HF_ENDPOINT"
    assert (staged.path / "config.json").is_file()


def test_unknown_repos_and_revisions_are_user_input_errors(hub: LocalHub):
    hub.add_repo(REPO, tiny_model_files())
    with pytest.raises(UserInputError, match="does not exist or is not accessible"):
        fetch_manifest(parse_model_source("acme/missing"), endpoint=hub.url)
    with pytest.raises(UserInputError, match="revision 'v9'"):
        fetch_manifest(parse_model_source(f"{REPO}@v9"), endpoint=hub.url)


def test_an_unreachable_hub_is_reported_as_such():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(HubUnreachableError, match="cannot read"):
        fetch_manifest(parse_model_source(REPO), endpoint=f"http://127.0.0.1:{closed_port}")


# ---- resume ----


def test_a_connection_dropped_mid_file_resumes_with_an_http_range_request(
    hub: LocalHub, tmp_path: Path
):
    # huggingface_hub writes in 10 MiB chunks; drop after the first one so a resume has
    # something on disk to continue from.
    files = tiny_model_files(shard_bytes=12 * MIB)
    hub.add_repo(REPO, files)
    hub.faults.drop_after[f"{REPO}/{SHARD_1}"] = 11 * MIB
    staged = stage(parse_model_source(REPO), config_for(tmp_path, hub))
    ranges = [record.range for record in hub.downloads(REPO, SHARD_1)]
    assert ranges == [None, f"bytes={10 * MIB}-"]
    assert (staged.path / SHARD_1).read_bytes() == files[SHARD_1]


def test_a_killed_staging_resumes_and_keeps_every_file_finished_before_the_kill(
    hub: LocalHub, tmp_path: Path
):
    files = tiny_model_files()
    repo = hub.add_repo(REPO, files)
    hub.faults.stall_after[f"{REPO}/{SHARD_2}"] = 64 * 1024
    config = config_for(tmp_path, hub, download_workers=2)
    child = run_child(REPO, config)
    layout = CacheLayout(tmp_path)
    manifest = fetch_manifest(parse_model_source(REPO), endpoint=hub.url)
    entry_dir = layout.entry_dir(entry_name_for(manifest))
    finished = [path for path in files if path not in (SHARD_2, "pytorch_model.bin")]
    try:
        wait_until(hub.stalled.is_set, 60, 0.05, message="the download never reached the stall")
        wait_until(
            lambda: all(
                (entry_dir / path).is_file()
                and (entry_dir / path).stat().st_size == len(files[path])
                for path in finished
            ),
            60,
            0.05,
            message="the files before the stalled one never completed",
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    name = entry_name_for(manifest)
    assert entry_state(layout, name) is EntryState.PARTIAL, "a killed staging is never staged"

    del hub.faults.stall_after[f"{REPO}/{SHARD_2}"]
    gets_before = {path: len(hub.downloads(REPO, path)) for path in finished}
    staged = stage(parse_model_source(REPO), config)
    assert staged.path == entry_dir and staged.entry == name
    for path in finished:
        assert len(hub.downloads(REPO, path)) == gets_before[path], f"{path} was fetched again"
    assert len(hub.downloads(REPO, SHARD_2)) == 2
    assert staged.downloaded_bytes == len(files[SHARD_2])
    assert (entry_dir / SHARD_2).read_bytes() == files[SHARD_2]
    assert not list(entry_dir.rglob("*.incomplete")), "the killed run's temporary file is gone"
    assert entry_state(layout, name) is EntryState.STAGED
    assert f"/{repo.commit}/" in hub.downloads(REPO, SHARD_2)[-1].path


def test_two_stagings_of_the_same_model_download_each_file_once(hub: LocalHub, tmp_path: Path):
    hub.add_repo(REPO, tiny_model_files())
    hub.faults.stall_after[f"{REPO}/{SHARD_1}"] = 1024
    config = config_for(tmp_path, hub)
    children = [run_child(REPO, config) for _ in range(2)]
    wait_until(hub.stalled.is_set, 60, 0.05, message="the download never reached the stall")
    time.sleep(1.0)  # let the second process reach the entry lock
    hub.release.set()
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    paths = {json.loads(out)["path"] for out, _ in outputs}
    assert len(paths) == 1
    for path in (SHARD_1, SHARD_2, "config.json"):
        assert len(hub.downloads(REPO, path)) == 1


# ---- integrity ----


def test_a_file_of_the_wrong_size_is_never_marked_staged_and_is_fetched_again(
    hub: LocalHub, tmp_path: Path
):
    files = tiny_model_files()
    hub.add_repo(REPO, files)
    hub.faults.served_content[f"{REPO}/{SHARD_2}"] = files[SHARD_2] + b"trailing garbage"
    config = config_for(tmp_path, hub)
    with pytest.raises(IntegrityError, match=f"{SHARD_2}: expected {len(files[SHARD_2])} bytes"):
        stage(parse_model_source(REPO), config, node="node-a")
    layout = CacheLayout(tmp_path)
    (entry,) = list_entries(layout)
    assert entry.state is EntryState.PARTIAL
    assert not (entry.path / SHARD_2).exists(), "the bad file was removed"

    del hub.faults.served_content[f"{REPO}/{SHARD_2}"]
    staged = stage(parse_model_source(REPO), config, node="node-a")
    assert len(hub.downloads(REPO, SHARD_1)) == 1, "good files were kept"
    assert staged.downloaded_bytes == len(files[SHARD_2])
    assert entry_state(layout, entry.name) is EntryState.STAGED


def test_a_file_with_the_right_size_but_the_wrong_bytes_fails_the_sha256_check(
    hub: LocalHub, tmp_path: Path
):
    files = tiny_model_files()
    hub.add_repo(REPO, files)
    hub.faults.served_content[f"{REPO}/{SHARD_1}"] = bytes(len(files[SHARD_1]))
    with pytest.raises(IntegrityError, match="sha256"):
        stage(parse_model_source(REPO), config_for(tmp_path, hub))
    (entry,) = list_entries(CacheLayout(tmp_path))
    assert entry.state is EntryState.PARTIAL


# ---- disk budget ----


def test_a_model_larger_than_the_disk_is_refused_before_the_first_byte(
    hub: LocalHub, tmp_path: Path
):
    hub.add_repo(REPO, tiny_model_files(shard_bytes=3 * MIB))
    with small_volume(tmp_path / "volume", 2 * MIB) as volume:
        with pytest.raises(InsufficientDiskError) as refused:
            stage(parse_model_source(REPO), config_for(volume, hub), node="node-a")
        message = str(refused.value)
        assert "node node-a" in message
        assert "needs 5.0 MiB more" in message
        assert "free" in message
        assert hub.resolve_requests(REPO) == [], "not a single file request was made"
        assert list_entries(CacheLayout(volume))[0].size_bytes < 64 * 1024


def test_the_reserve_is_kept_free(hub: LocalHub, tmp_path: Path):
    hub.add_repo(REPO, tiny_model_files())
    free_gib = shutil.disk_usage(tmp_path).free / 1024**3
    config = config_for(tmp_path, hub, reserve_gib=free_gib + 1)
    manifest = fetch_manifest(parse_model_source(REPO), endpoint=hub.url)
    assert not check_disk(manifest, config).fits
    with pytest.raises(InsufficientDiskError, match="reserve"):
        stage(parse_model_source(REPO), config)
    assert hub.resolve_requests(REPO) == []


def test_two_processes_racing_for_the_last_space_cannot_both_download(
    hub: LocalHub, tmp_path: Path
):
    for name in ("acme/first", "acme/second"):
        hub.add_repo(name, {"config.json": b"{}", "model.safetensors": os.urandom(4 * MIB)})
        hub.faults.stall_after[f"{name}/model.safetensors"] = 64 * 1024
    with small_volume(tmp_path / "volume", 6 * MIB) as volume:
        config = config_for(volume, hub)
        children = {
            name: run_child(name, config, node="node-a") for name in ("acme/first", "acme/second")
        }
        wait_until(
            lambda: any(child.poll() is not None for child in children.values()),
            60,
            0.05,
            message="neither staging gave up for lack of space",
        )
        hub.release.set()
        results = {
            name: (child.communicate(timeout=120), child.returncode)
            for name, child in children.items()
        }
        codes = sorted(code for _, code in results.values())
        assert codes == [0, 1], results
        (loser,) = [name for name, (_, code) in results.items() if code == 1]
        (_, loser_err), _ = results[loser]
        assert "InsufficientDiskError" in loser_err and "node node-a" in loser_err
        assert "promised to other stagings" in loser_err
        assert "- 0 B promised" not in loser_err, "refused because of the winner's promise"
        assert hub.resolve_requests(loser) == [], "the loser never started downloading"


# ---- eviction ----


def test_eviction_frees_space_from_lru_models_but_never_a_serving_or_pinned_one(
    hub: LocalHub, tmp_path: Path
):
    for name in ("acme/serving", "acme/idle", "acme/new", "acme/newer"):
        hub.add_repo(name, {"config.json": b"{}", "model.safetensors": os.urandom(MIB)})
    with small_volume(tmp_path / "volume", 5 * MIB // 2) as volume:
        config = config_for(volume, hub, allow_eviction=True)
        layout = CacheLayout(volume)
        serving = stage(parse_model_source("acme/serving"), config)
        time.sleep(0.05)
        idle = stage(parse_model_source("acme/idle"), config)
        # The serving model is the least recently used; it must survive anyway.
        os.utime(serving.path / ".switchyard" / "last_used", (1, 1))
        protected = frozenset({serving.entry or ""})

        new = stage(parse_model_source("acme/new"), config, protected=protected)
        names = {entry.name: entry.state for entry in list_entries(layout)}
        assert names == {
            serving.entry: EntryState.STAGED,
            new.entry: EntryState.STAGED,
        }, "only the idle model was evicted"
        assert idle.entry not in names

        pin(layout, new.entry or "", "pending swap")
        with pytest.raises(InsufficientDiskError):
            stage(parse_model_source("acme/newer"), config, protected=protected)
        assert {entry.name for entry in list_entries(layout)} >= {serving.entry, new.entry}
        assert hub.resolve_requests("acme/newer") == []
        assert (serving.path / "model.safetensors").stat().st_size == MIB


def test_a_hub_gone_during_staging_leaves_a_partial_entry_and_no_promise(tmp_path: Path):
    with LocalHub() as hub:
        hub.add_repo(REPO, tiny_model_files())
        manifest = fetch_manifest(parse_model_source(REPO), endpoint=hub.url)
    # The hub is gone now; staging with the manifest admission already used fails cleanly.
    # The endpoint is a port we hold bound but never listen on, so connections are refused
    # (the hub's old port could be reused by another process meanwhile).
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        config = config_for(tmp_path, hub, hub_endpoint=f"http://127.0.0.1:{dead.getsockname()[1]}")
        # huggingface_hub may swallow a refused connection and leave files missing, so the
        # failure surfaces as unreachable or as failed verification; either way it is clean.
        with pytest.raises((HubUnreachableError, IntegrityError)):
            stage(parse_model_source(REPO), config, manifest=manifest)
    layout = CacheLayout(tmp_path)
    assert entry_state(layout, entry_name_for(manifest)) is EntryState.PARTIAL
    assert json.loads(layout.reservations_file.read_text()) == []


def test_the_stage_command_stages_from_the_hub_and_cache_list_shows_it(
    hub: LocalHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from switchyard import cli

    hub.add_repo(REPO, tiny_model_files())
    common = ["--cache-dir", str(tmp_path)]
    dry = ["stage", REPO, "--dry-run", "--json", "--endpoint", hub.url, "--reserve-gib", "0"]
    assert cli.main([*dry, *common]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fits"] and report["need_bytes"] == report["manifest"]["total_bytes"]
    assert hub.resolve_requests(REPO) == []

    assert (
        cli.main(["stage", REPO, "--json", "--endpoint", hub.url, "--reserve-gib", "0", *common])
        == 0
    )
    staged = json.loads(capsys.readouterr().out)
    assert Path(staged["path"], "config.json").is_file()

    assert cli.main(["cache", "list", "--json", *common]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "staged" and row["source"] == REPO
