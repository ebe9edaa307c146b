"""Runs one `stage()` in its own process, for tests that kill or race stagings.

    python -m tests.integration.staging_child '{"source": "org/m", "config": {...}}'

Prints the staged model as JSON. Exit status: 0 staged, 1 refused or failed (`Rejected`,
message on stderr), 3 anything else.
"""

from __future__ import annotations

import json
import sys

from cluster.staging.stage import stage
from cluster.staging.staging_config import StagingConfig
from domain.exit_codes import Rejected
from domain.model_source import parse_model_source


def main(argv: list[str]) -> int:
    request = json.loads(argv[1])
    config = StagingConfig.model_validate(request["config"])
    try:
        staged = stage(
            parse_model_source(request["source"]),
            config,
            protected=frozenset(request.get("protected", [])),
            node=request.get("node"),
        )
    except Rejected as exc:
        print(f"REJECTED {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(staged.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
