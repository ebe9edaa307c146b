"""`switchyard cache list|evict|prune|pin|unpin`: look after the weight cache of a node.

Eviction never touches a pinned entry or one being staged. A serving model is protected
because the manager pins what it serves; `pin` does the same by hand.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from domain.exit_codes import ExitCode, UserInputError

if TYPE_CHECKING:
    from cluster.staging.cache_entries import CacheEntry
    from cluster.staging.cache_layout import CacheLayout

_SUBCOMMANDS = ("list", "evict", "prune", "pin", "unpin")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="list, evict or prune staged model weights",
        description=(
            "Manage the weight cache (default: $SWITCHYARD_CACHE_DIR or ~/.cache/switchyard)."
        ),
    )
    actions = parser.add_subparsers(dest="cache_action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="models in the cache, with size, state and last use")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.add_argument(
        "--all-nodes",
        action="store_true",
        help="list the cache of every alive node of the running Ray cluster (address=auto)",
    )

    evict = actions.add_parser("evict", help="delete one model that is not pinned or staging")
    evict.add_argument("name", help="cache entry name, or a hub source org/name[@revision]")

    actions.add_parser("prune", help="delete partial downloads and leftovers, keep staged models")

    pin = actions.add_parser("pin", help="keep an entry whatever eviction wants")
    pin.add_argument("name")
    pin.add_argument("--reason", default="pinned by hand", help="recorded in the pins file")

    unpin = actions.add_parser("unpin", help="allow an entry to be evicted again")
    unpin.add_argument("name")

    for action in actions.choices.values():
        action.add_argument(
            "--cache-dir", type=Path, default=None, help="the cache root (same path on every node)"
        )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.staging.cache_layout import CacheLayout
    from cluster.staging.staging_config import default_cache_dir, load_staging_config

    cache_dir = args.cache_dir or default_cache_dir(os.environ)
    config = load_staging_config({"cache_dir": cache_dir})
    layout = CacheLayout(config.cache_dir)
    action: str = args.cache_action
    if action == "list":
        return _list(args, config.cache_dir, layout)
    if action == "evict":
        return _evict(layout, args.name)
    if action == "prune":
        return _prune(layout)
    if action == "pin":
        return _pin(layout, args.name, args.reason)
    if action == "unpin":
        return _unpin(layout, args.name)
    raise UserInputError(f"cache: unknown action {action!r}; allowed: {', '.join(_SUBCOMMANDS)}")


def _list(args: argparse.Namespace, cache_dir: Path, layout: CacheLayout) -> int:
    from cluster.staging.cache_entries import list_entries
    from cluster.staging.stage import default_node_name

    if args.all_nodes:
        from cluster.staging.node_tasks import list_entries_on_every_node

        per_node = list_entries_on_every_node(cache_dir)
    else:
        per_node = {default_node_name(): list_entries(layout)}
    if args.json:
        payload = [
            {"node": node, **entry.to_json()}
            for node, entries in per_node.items()
            for entry in entries
        ]
        print(json.dumps(payload, indent=2))
        return ExitCode.OK
    print(_table(per_node))
    return ExitCode.OK


def _table(per_node: dict[str, list[CacheEntry]]) -> str:
    from cluster.staging.progress import format_bytes

    header = ("NODE", "NAME", "STATE", "SIZE", "EXPECTED", "LAST USED", "PINNED", "SOURCE")
    rows = [header]
    for node, entries in per_node.items():
        for entry in entries:
            rows.append(
                (
                    node,
                    entry.name,
                    entry.state.value,
                    format_bytes(entry.size_bytes),
                    "?" if entry.expected_bytes is None else format_bytes(entry.expected_bytes),
                    entry.last_used.strftime("%Y-%m-%d %H:%M:%S") if entry.last_used else "never",
                    "yes" if entry.pinned else "",
                    entry.source or "?",
                )
            )
    if len(rows) == 1:
        return "the cache is empty"
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _evict(layout: CacheLayout, name: str) -> int:
    from cluster.staging.eviction import evict_entry
    from cluster.staging.progress import format_bytes

    freed = 0
    for entry in _matching_entries(layout, name):
        freed += evict_entry(layout, entry, frozenset())
        print(f"evicted {entry}")
    print(f"freed {format_bytes(freed)}")
    return ExitCode.OK


def _matching_entries(layout: CacheLayout, name: str) -> list[str]:
    """An exact entry name, or the one entry of a hub source `org/name[@revision]`."""
    from domain.model_source import SourceKind, parse_model_source

    names = layout.entry_names()
    if name in names:
        return [name]
    if "/" not in name:
        raise UserInputError(f"cache evict: no entry named {name!r}; see `switchyard cache list`")
    source = parse_model_source(name)
    if source.kind is not SourceKind.HUB or source.repo_id is None:
        raise UserInputError(f"cache evict: {name!r} is not a cached hub source")
    prefix = source.repo_id.replace("/", "--") + "--"
    matches = [
        entry
        for entry in names
        if entry.startswith(prefix)
        and (source.revision is None or entry.removeprefix(prefix).startswith(source.revision[:12]))
    ]
    if not matches:
        raise UserInputError(
            f"cache evict: no cached entry of {name!r}; see `switchyard cache list`"
        )
    if len(matches) > 1:
        raise UserInputError(
            f"cache evict: {name!r} matches {len(matches)} entries ({', '.join(matches)}); name one"
        )
    return matches


def _prune(layout: CacheLayout) -> int:
    from cluster.staging.eviction import prune_cache
    from cluster.staging.progress import format_bytes

    report = prune_cache(layout)
    for name in report.removed_entries:
        print(f"removed partial entry {name}")
    print(f"freed {format_bytes(report.freed_bytes)}")
    return ExitCode.OK


def _pin(layout: CacheLayout, name: str, reason: str) -> int:
    from cluster.staging.cache_entries import pin

    if name not in layout.entry_names():
        raise UserInputError(f"cache pin: no entry named {name!r}; see `switchyard cache list`")
    pin(layout, name, reason)
    print(f"pinned {name}")
    return ExitCode.OK


def _unpin(layout: CacheLayout, name: str) -> int:
    from cluster.staging.cache_entries import unpin

    if not unpin(layout, name):
        raise UserInputError(f"cache unpin: {name!r} was not pinned")
    print(f"unpinned {name}")
    return ExitCode.OK
