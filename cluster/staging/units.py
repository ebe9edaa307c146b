"""How byte counts, rates and durations read in messages and progress lines."""

from __future__ import annotations

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KiB'; exact below 1 KiB so small test models read naturally."""
    value = float(count)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in _BINARY_UNITS:
        if value < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{sign}{int(value)} B" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_rate(bytes_per_s: float) -> str:
    return f"{format_bytes(bytes_per_s)}/s"


def format_duration(seconds: float | None) -> str:
    """'1h02m', '4m05s', '12s'; '?' when unknown."""
    if seconds is None or seconds < 0:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
