"""The disk fills while weights are downloading (something else writes to the volume after
the space check passed): staging fails with a clear error, the half-written model is never
handed out, the serving model's files are untouched, and staging completes once space is
back. Real huggingface_hub download path, a local Hub on 127.0.0.1 and a real small tmpfs.

The manager-level consequence (a swap whose staging fails changes nothing) is
test_fleet_manager_faults.py.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.staging.cache_entries import EntryState, list_entries, pin
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.stage import stage
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import StagingError
from domain.model_source import parse_model_source
from tests.integration.local_hub import LocalHub
from tests.integration.small_volume import small_volume

MIB = 1024**2
SERVING = "acme/serving"
NEW = "acme/new"


@pytest.fixture
def hub() -> Iterator[LocalHub]:
    with LocalHub() as local_hub:
        yield local_hub


def _config(cache_dir: Path, hub: LocalHub) -> StagingConfig:
    return StagingConfig(cache_dir=cache_dir, reserve_gib=0, hub_endpoint=hub.url)


def _digest(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and ".switchyard" not in path.parts
    }


def test_a_disk_that_fills_mid_download_fails_cleanly_and_nothing_half_written_is_used(
    hub: LocalHub, tmp_path: Path
) -> None:
    hub.add_repo(SERVING, {"config.json": b"{}", "model.safetensors": os.urandom(MIB)})
    hub.add_repo(NEW, {"config.json": b"{}", "model.safetensors": os.urandom(4 * MIB)})
    hub.faults.stall_after[f"{NEW}/model.safetensors"] = 64 * 1024
    with small_volume(tmp_path / "volume", 8 * MIB) as volume:
        config = _config(volume, hub)
        layout = CacheLayout(volume)
        serving = stage(parse_model_source(SERVING), config)
        assert serving.entry is not None
        pin(layout, serving.entry, "serving")
        serving_files = _digest(serving.path)

        failure: list[BaseException] = []

        def stage_new() -> None:
            try:
                stage(parse_model_source(NEW), config)
            except BaseException as exc:
                failure.append(exc)

        staging = threading.Thread(target=stage_new)
        staging.start()
        assert hub.stalled.wait(60), "the download never started"
        # The space check has passed; now another writer takes (almost) all that is left.
        filler = volume / "filler"
        with filler.open("wb") as handle:
            left = os.statvfs(volume).f_bavail * os.statvfs(volume).f_frsize
            handle.write(b"\0" * max(0, left - 128 * 1024))
        hub.release.set()
        staging.join(timeout=120)
        assert not staging.is_alive(), "staging hung on a full disk"

        assert len(failure) == 1 and isinstance(failure[0], StagingError), failure
        message = str(failure[0])
        assert "filled up during the download" in message, message
        assert "No space left on device" in message or "Errno 28" in message, message
        states = {entry.name: entry.state for entry in list_entries(layout)}
        assert states[serving.entry] is EntryState.STAGED
        new_entries = [name for name in states if name != serving.entry]
        assert all(states[name] is not EntryState.STAGED for name in new_entries), states
        assert _digest(serving.path) == serving_files, "the serving model was touched"

        # Still full: a second attempt is refused again, never handed the partial files.
        with pytest.raises(StagingError):
            stage(parse_model_source(NEW), config)

        filler.unlink()
        staged = stage(parse_model_source(NEW), config)
        assert (staged.path / "model.safetensors").stat().st_size == 4 * MIB
        assert staged.entry is not None
        assert {e.name: e.state for e in list_entries(layout)}[staged.entry] is EntryState.STAGED
        assert _digest(serving.path) == serving_files
