"""Weight staging: budgeted, resumable, verified model downloads on the nodes that need them.

Entry points for the rest of Switchyard, each in the module named:

- `manifest.fetch_manifest(source)` -> `SourceManifest`: files and sizes before any
  download (admission uses `manifest.total_bytes`).
- `stage.check_disk(manifest, config)` / `node_tasks.check_disk_across_nodes(...)` ->
  `DiskVerdict` (`space_gate.py`); `disk_report.weights_disk_report` for every node at once.
- `stage.stage(source, config, manifest=..., protected=...)` -> `StagedModel` on this node;
  `node_tasks.stage_across_nodes(source, config, node_ids, ...)` -> `ClusterStaging` via Ray
  tasks; `replica_weights.py` for an engine replica on its own node.
- `cache_entries.list_entries`, `eviction.evict_entry`, `eviction.pin`/`unpin`,
  `eviction.prune_cache`: cache management.

The package re-exports nothing, so importing one module never brings Ray: only
`node_tasks.py` and `replica_weights.py` use it.
"""
