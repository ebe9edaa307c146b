"""A judged fleet plan as people read it (`diff`, `apply`); `--json` prints `to_json()`."""

from __future__ import annotations

from typing import Any


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The plan (`FleetPlan.to_json()`), one step per block, each with its verdict."""
    changes = plan["changes"]
    verdict = "admitted" if plan["admitted"] else "REFUSED: nothing will run"
    lines = (
        [f"plan: {len(changes)} change(s), {verdict}"]
        if changes
        else ["no changes: the fleet matches the file"]
    )
    for i, change in enumerate(changes, 1):
        lines.append(f"  {i}. {_headline(change)}: {_verdict(change)}")
        if change["action"] in ("add", "swap"):
            if change.get("layout"):
                lines.append(
                    f"     layout {change['layout']}, {change['accelerators']} accelerator(s), "
                    f"weights {change['disk']['weights_gib']} GiB"
                )
            if change.get("engine"):
                settings = ", ".join(f"{k}={v}" for k, v in sorted(change["engine"].items()))
                lines.append(f"     engine: {settings}")
            capacity = change.get("capacity") or {}
            if capacity.get("kv_cache_tokens") is not None:
                source = (
                    "logged by an engine of this deployment"
                    if capacity.get("kv_source") == "observed"
                    else "the memory model's prediction"
                )
                lines.append(
                    f"     KV cache {capacity['kv_cache_tokens']:,} tokens per engine ({source})"
                )
            lines.extend(f"     {note}" for note in change.get("recipe", []))
            if change.get("parked"):
                lines.append(
                    "     added parked: it fits once the other on-demand models park; its "
                    "first request wakes it"
                )
        lines.extend(f"     refused: {reason}" for reason in change["reasons"])
        lines.extend(f"     {alias}: {what}" for alias, what in change["aliases"].items())
    for alias in plan.get("left_aliases", []):
        lines.append(f"  note: alias {alias} is not in the file; it is left as it is")
    for a, b in plan.get("never_resident_together", []):
        lines.append(
            f"  note: {a} and {b} (on demand) are never resident together: a request for one "
            "parks the other"
        )
    return lines


def _headline(change: dict[str, Any]) -> str:
    action = change["action"]
    if action == "swap":
        if change["replaces"] == change["model"]:
            what = ", ".join(change.get("changed", [])) or "settings"
            return f"swap {change['model']} (new {what}) by {change['strategy']}"
        return f"swap {change['replaces']} -> {change['model']} by {change['strategy']}"
    if action == "alias":
        return f"alias {change['alias']} -> {change['model']}"
    if action == "residency":
        keys = change["residency"]
        return f"residency {change['model']}: " + ", ".join(
            f"{k} {keys[k]}" for k in change.get("changed", [])
        )
    return f"{action} {change['model']}"


def _verdict(change: dict[str, Any]) -> str:
    return "admitted" if change["admitted"] else "refused"
