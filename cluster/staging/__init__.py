"""Weight staging: budgeted, resumable, verified model downloads on the nodes that need them.

Entry points for the rest of Switchyard:

- `fetch_manifest(source)` -> `SourceManifest`: files and sizes before any download
  (admission uses `manifest.total_bytes`).
- `check_disk(manifest, config)` / `check_disk_across_nodes(...)` -> `DiskVerdict`.
- `stage(source, config, manifest=..., protected=...)` -> `StagedModel` on this node;
  `stage_across_nodes(source, config, node_ids, ...)` -> `ClusterStaging` via Ray tasks.
- `list_entries`, `evict_entry`, `pin`/`unpin`, `prune_cache`: cache management.

Ray is imported only inside `node_tasks` functions, so importing this package stays cheap.
"""

from cluster.staging.budget import DiskVerdict
from cluster.staging.cache_entries import CacheEntry, list_entries
from cluster.staging.config import StagingConfig, StagingMode, load_staging_config
from cluster.staging.errors import (
    HubUnreachableError,
    InsufficientDiskError,
    IntegrityError,
    StagingError,
)
from cluster.staging.eviction import EvictionRefused, evict_entry
from cluster.staging.layout import CacheLayout, entry_name_for
from cluster.staging.manifest import ManifestFile, SourceManifest
from cluster.staging.manifest_fetch import fetch_manifest
from cluster.staging.node_tasks import (
    ClusterStaging,
    ClusterStagingError,
    NodeStaging,
    check_disk_across_nodes,
    list_entries_across_nodes,
    stage_across_nodes,
)
from cluster.staging.pins import pin, read_pins, unpin
from cluster.staging.prune import PruneReport, prune_cache
from cluster.staging.stage import StagedModel, check_disk, stage
from cluster.staging.states import EntryState

__all__ = [
    "CacheEntry",
    "CacheLayout",
    "ClusterStaging",
    "ClusterStagingError",
    "DiskVerdict",
    "EntryState",
    "EvictionRefused",
    "HubUnreachableError",
    "InsufficientDiskError",
    "IntegrityError",
    "ManifestFile",
    "NodeStaging",
    "PruneReport",
    "SourceManifest",
    "StagedModel",
    "StagingConfig",
    "StagingError",
    "StagingMode",
    "check_disk",
    "check_disk_across_nodes",
    "entry_name_for",
    "evict_entry",
    "fetch_manifest",
    "list_entries",
    "list_entries_across_nodes",
    "load_staging_config",
    "pin",
    "prune_cache",
    "read_pins",
    "stage",
    "stage_across_nodes",
    "unpin",
]
