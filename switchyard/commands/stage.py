"""`switchyard stage SOURCE`: stage a model's weights on this node (for ops and tests).

Prints the verified directory to give vLLM. `--dry-run` stops after the manifest and the
disk verdict: it shows the real size and whether it fits, and downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from domain.exit_codes import ExitCode, Rejected


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "stage",
        help="download and verify a model's weights into this node's cache",
        description=(
            "SOURCE is org/name[@revision], a local directory (/path, ./path, ~/path) or "
            "miniature:NAME. Honours HF_ENDPOINT and HF_TOKEN."
        ),
    )
    parser.add_argument("source", help="what to stage")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--dry-run", action="store_true", help="manifest and disk verdict only")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the cache root")
    parser.add_argument("--reserve-gib", type=float, default=None, help="space kept free (GiB)")
    parser.add_argument(
        "--allow-eviction", action="store_true", help="evict LRU unpinned models if needed"
    )
    parser.add_argument(
        "--no-verify-sha256", action="store_true", help="check sizes only, skip hashing"
    )
    parser.add_argument("--endpoint", default=None, help="Hub URL (default: HF_ENDPOINT)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.staging.cache_entries import read_pins
    from cluster.staging.cache_layout import CacheLayout
    from cluster.staging.manifest import fetch_manifest
    from cluster.staging.progress import format_bytes
    from cluster.staging.stage import check_disk, stage
    from cluster.staging.staging_config import default_cache_dir, load_staging_config
    from domain.model_source import parse_model_source

    source = parse_model_source(args.source)
    settings: dict[str, object] = {
        "cache_dir": args.cache_dir or default_cache_dir(os.environ),
        "allow_eviction": args.allow_eviction,
        "verify_sha256": not args.no_verify_sha256,
        "hub_endpoint": args.endpoint,
    }
    if args.reserve_gib is not None:
        settings["reserve_gib"] = args.reserve_gib
    config = load_staging_config(settings)
    protected = read_pins(CacheLayout(config.cache_dir))
    manifest = fetch_manifest(
        source,
        endpoint=config.hub_endpoint,
        miniature_dir=CacheLayout(config.cache_dir).miniatures_dir,
    )

    if args.dry_run:
        verdict = check_disk(manifest, config, protected=protected)
        fits = verdict.fits or (config.allow_eviction and verdict.fits_with_eviction)
        if args.json:
            print(
                json.dumps(
                    {
                        "manifest": manifest.to_json(),
                        "need_bytes": verdict.need_bytes,
                        "usable_bytes": verdict.usable_bytes,
                        "free_bytes": verdict.free_bytes,
                        "node": verdict.node,
                        "fits": fits,
                    },
                    indent=2,
                )
            )
        else:
            print(
                f"{source}: {manifest.file_count} files, {format_bytes(manifest.total_bytes)}"
                + (f" at commit {manifest.commit}" if manifest.commit else "")
            )
            print(verdict.describe())
        if not fits:
            raise Rejected(verdict.describe())
        return ExitCode.OK

    staged = stage(source, config, manifest=manifest, protected=protected)
    if args.json:
        print(json.dumps(staged.to_json(), indent=2))
    else:
        print(staged.path)
    return ExitCode.OK
