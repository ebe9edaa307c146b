"""Print the first engine replica's direct URL and token, as the fleet registry has them.

Run by relay_paths.engine_endpoint in a process of its own, so the benchmark's process never
becomes a Ray driver (a driver's threads would share its cores during the measurements):

    python -m benchmarks.registry_probe RAY_ADDRESS     # prints ["http://...", "token"]
"""

from __future__ import annotations

import json
import sys

from cluster.clients.registry_client import RayRegistryClient


def main(argv: list[str]) -> int:
    found = RayRegistryClient.connect(argv[0]).engine_endpoints()
    if not found:
        print("the fleet registry has no engine endpoint", file=sys.stderr)
        return 1
    print(json.dumps([found[0].url, found[0].token]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
