"""Prometheus alert rules shipped with the dashboards (`dashboards/prometheus/alerts.yml`,
loaded by `switchyard metrics prometheus`).

Every expression names metrics through `metric_names`, so a renamed metric breaks the build
of this file, not a silent alert; a unit test checks each rule parses (`promtool`) and names
only catalogued series, and the real-stack observability test sees Prometheus load them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain import metric_names as m

DISK_NEARLY_FULL_GIB = 20
"""Free space on a node's staging cache below which staging a checkpoint is at risk (the
smallest of the story's models is about 230 GB; a miniature is a few MiB)."""

GIB = 2**30


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_s: int
    severity: str
    summary: str
    description: str
    metrics: tuple[m.MetricSpec, ...]
    """The catalogued metrics `expr` reads (checked by the tests)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": f"{self.for_s}s",
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def alert_rules() -> tuple[AlertRule, ...]:
    state = m.MODEL_STATE.exported
    operations = m.OPERATIONS.exported
    rejections = m.KEY_REJECTIONS.exported
    requests = m.KEY_REQUESTS.exported
    disk = m.DISK_FREE_BYTES.exported
    return (
        AlertRule(
            "SwitchyardEngineDown",
            f'max by (model, state) ({state}{{state=~"failed|degraded"}}) == 1',
            60,
            "critical",
            "Model {{ $labels.model }} is {{ $labels.state }}",
            "Its engine replicas are not all running (failed to start, or died and are not "
            "back): requests get 503 or run on fewer replicas. `switchyard status` says why.",
            (m.MODEL_STATE,),
        ),
        AlertRule(
            "SwitchyardSwapRolledBack",
            f'sum by (kind) (increase({operations}{{kind="swap",outcome="rolled_back"}}[15m])) > 0',
            0,
            "warning",
            "A swap was rolled back",
            "The new model did not come up (or failed its checks) and the old one serves "
            "again; `switchyard status` shows the last swap and its phases.",
            (m.OPERATIONS,),
        ),
        AlertRule(
            "SwitchyardQuotaSaturated",
            f'sum by (key) (rate({rejections}{{reason=~"requests_per_minute|tokens_per_minute"}}'
            f"[5m])) / (sum by (key) (rate({requests}[5m])) + sum by (key) (rate({rejections}"
            '{reason=~"requests_per_minute|tokens_per_minute"}[5m]))) > 0.1',
            300,
            "warning",
            "Key {{ $labels.key }} is over its quota",
            "More than a tenth of this key's requests got 429 for five minutes: raise its "
            "requests_per_minute / tokens_per_minute or talk to its owner.",
            (m.KEY_REJECTIONS, m.KEY_REQUESTS),
        ),
        AlertRule(
            "SwitchyardDiskNearlyFull",
            f"min by (node) ({disk}) < {DISK_NEARLY_FULL_GIB} * {GIB}",
            600,
            "warning",
            f"Staging cache of {{{{ $labels.node }}}} has under {DISK_NEARLY_FULL_GIB} GiB free",
            "The next model's weights may not fit; admission will refuse it. Remove unused "
            "checkpoints with `switchyard cache`.",
            (m.DISK_FREE_BYTES,),
        ),
    )


def alert_rules_file() -> dict[str, Any]:
    return {"groups": [{"name": "switchyard", "rules": [r.to_json() for r in alert_rules()]}]}
