"""The sweep's plot: output tok/s and TTFT against concurrency (matplotlib, no display)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from switchyard.bench.level_metrics import LevelMetrics


def plot_series(path: Path, series: Mapping[str, Sequence[LevelMetrics]], *, title: str) -> None:
    """One line per series (a server, a layout) in both panels; x is log2 concurrency."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    figure, (tok_axis, ttft_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, levels in series.items():
        ordered = sorted(levels, key=lambda m: m.concurrency)
        xs = [m.concurrency for m in ordered]
        tok_axis.plot(xs, [m.output_tokens_per_s for m in ordered], marker="o", label=label)
        ttft = [(m.concurrency, m.ttft.p50_ms) for m in ordered if m.ttft is not None]
        if ttft:
            ttft_axis.plot(*zip(*ttft, strict=True), marker="o", label=label)
    tok_axis.set(xlabel="concurrency", ylabel="output tokens / s", title="throughput")
    ttft_axis.set(xlabel="concurrency", ylabel="TTFT p50 (ms)", title="time to first token")
    ticks = sorted({m.concurrency for ms in series.values() for m in ms})
    for axis in (tok_axis, ttft_axis):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, [str(tick) for tick in ticks])
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
