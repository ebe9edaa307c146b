"""The steps from one fleet to another: what `diff` lists and `apply` carries out.

Pure: the live fleet (each model's entry as it was asked for, and the alias map) and a
fleet file in, an ordered list of changes out. The order is the one `apply` runs them in:

1. removes: a live model missing from the file, unless it is replaced (below);
2. swaps: a live model missing from the file whose aliases all go to one model that is new
   in the file (`replaces` = the live one), or a model whose source, layout, engine settings
   or replicas changed, or whose park mode moved to or from `sleep` (the engine starts with
   sleep mode enabled) (the same name, a new app generation). A swap moves its model's
   aliases itself, so they are not listed again;
3. adds: the file's other new models;
4. alias moves: an alias the file points somewhere the steps above do not take it;
5. residency changes: a model whose only change is its residency keys (`residency`,
   `park_after_idle_s`, `min_resident_s`, `park_mode` between modes without sleep,
   `sleep_level`): recorded, no redeploy.

An alias the file no longer lists is left where it is (`left_aliases`): Switchyard has no
alias removal yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from domain.fleet_file import FleetFile, FleetModelEntry


class ChangeAction(StrEnum):
    REMOVE = "remove"
    SWAP = "swap"
    ADD = "add"
    ALIAS = "alias"
    RESIDENCY = "residency"


@dataclass(frozen=True)
class FleetChange:
    action: ChangeAction
    model: str
    """The model removed, added or brought in by a swap; an alias's new target."""
    replaces: str | None = None
    """A swap's OLD (the same as `model` for a same-name change)."""
    alias: str | None = None
    entry: FleetModelEntry | None = None
    """What an add or a swap deploys, as the file has it."""
    changed: tuple[str, ...] = ()
    """A same-name swap: which of source, layout, engine, replicas, park_mode changed; a residency
    change: which of its keys."""


@dataclass(frozen=True)
class FleetDiff:
    changes: tuple[FleetChange, ...]
    left_aliases: tuple[str, ...] = field(default_factory=tuple)
    """Live aliases the file does not list; left pointing where they do."""


def diff_fleet(
    live: Mapping[str, FleetModelEntry], live_aliases: Mapping[str, str], desired: FleetFile
) -> FleetDiff:
    """The changes that make the live fleet (`live`: name -> entry as asked for;
    `live_aliases`: alias -> name) match `desired`."""
    wanted = {m.name: m for m in desired.models}
    targets = desired.alias_targets()
    new_names = [m.name for m in desired.models if m.name not in live]
    removes: list[FleetChange] = []
    swaps: list[FleetChange] = []
    taken: set[str] = set()
    residency: list[FleetChange] = []
    for name in sorted(live):
        if name in wanted:
            changed = _changed(live[name], wanted[name])
            if changed:
                swaps.append(
                    FleetChange(
                        ChangeAction.SWAP, name, replaces=name, entry=wanted[name], changed=changed
                    )
                )
            elif keys := _residency_changed(live[name], wanted[name]):
                residency.append(
                    FleetChange(ChangeAction.RESIDENCY, name, entry=wanted[name], changed=keys)
                )
            continue
        own = [a for a, m in sorted(live_aliases.items()) if m == name]
        heirs = {targets.get(a) for a in own}
        heir = next(iter(heirs)) if len(heirs) == 1 else None
        if own and heir is not None and heir in new_names and heir not in taken:
            taken.add(heir)
            swaps.append(FleetChange(ChangeAction.SWAP, heir, replaces=name, entry=wanted[heir]))
        else:
            removes.append(FleetChange(ChangeAction.REMOVE, name))
    adds = [FleetChange(ChangeAction.ADD, n, entry=wanted[n]) for n in new_names if n not in taken]
    after = _aliases_after(live_aliases, removes, swaps, adds)
    moves = [
        FleetChange(ChangeAction.ALIAS, target, alias=alias)
        for alias, target in sorted(targets.items())
        if after.get(alias) != target
    ]
    left = tuple(sorted(a for a in after if a not in targets))
    return FleetDiff((*removes, *swaps, *adds, *moves, *residency), left)


def _changed(live: FleetModelEntry, wanted: FleetModelEntry) -> tuple[str, ...]:
    was, now = live.deployed_form(), wanted.deployed_form()
    keys = ("source", "layout", "engine", "replicas", "park_mode")
    return tuple(k for k in keys if was.get(k) != now.get(k))


def _residency_changed(live: FleetModelEntry, wanted: FleetModelEntry) -> tuple[str, ...]:
    was, now = live.residency_form(), wanted.residency_form()
    return tuple(k for k in was if was[k] != now[k])


def _aliases_after(
    live_aliases: Mapping[str, str],
    removes: list[FleetChange],
    swaps: list[FleetChange],
    adds: list[FleetChange],
) -> dict[str, str]:
    """Where each alias points once the removes, swaps and adds have run (as the manager
    runs them: a swap moves OLD's aliases to NEW, a deployment points its own)."""
    after = dict(live_aliases)
    for change in removes:
        after = {a: m for a, m in after.items() if m != change.model}
    for change in swaps:
        after = {a: (change.model if m == change.replaces else m) for a, m in after.items()}
        assert change.entry is not None
        after.update(dict.fromkeys(change.entry.aliases, change.model))
    for change in adds:
        assert change.entry is not None
        after.update(dict.fromkeys(change.entry.aliases, change.model))
    return after
