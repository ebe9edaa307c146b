"""The engine's own error behind a failed deployment.

Serve reports a replica that failed to start with a long Python traceback whose last line is
usually vLLM's generic "Engine core initialization failed. See root cause above". The root
cause (e.g. `SafetensorError: ... incomplete metadata`) is printed by the engine's worker
process into the replica's log file on its node; this module finds it there.
"""

from __future__ import annotations

import re
from pathlib import Path

_PID = re.compile(r"pid=(\d+)")
_ERROR = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception): .+")
_GENERIC = ("Engine core initialization failed", "Traceback (most recent call last)")


def root_cause_lines(log_text: str) -> list[str]:
    """Exception lines from a log, most recent last, without vLLM's generic wrappers."""
    causes = []
    for line in log_text.splitlines():
        match = _ERROR.search(line)
        if match and not any(generic in line for generic in _GENERIC):
            causes.append(match.group(0).strip())
    return causes


def summarize_failure(message: str, logs_dir: Path | None) -> str:
    """One line: the engine's root cause when the replica's log is readable, then Serve's
    own message, cut to a readable length."""
    flat = " ".join(message.split())
    cause = None
    if logs_dir is not None and logs_dir.is_dir():
        for pid in dict.fromkeys(_PID.findall(flat)):
            for path in sorted(logs_dir.glob(f"worker-*-{pid}.*")):
                try:
                    lines = root_cause_lines(path.read_text(errors="replace"))
                except OSError:
                    continue
                if lines:
                    cause = lines[-1]
    if cause is None:
        return flat[:2000]
    return f"{cause[:1000]} (Serve: {flat[:300]} ...)"
