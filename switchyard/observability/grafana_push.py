"""Uploading the generated dashboards to Grafana's HTTP API with grafana-client."""

from __future__ import annotations

import re
from typing import Any

from domain.exit_codes import Rejected
from switchyard.observability.dashboards import dashboard_json, dashboards
from switchyard.observability.provisioning import FOLDER


def folder_uid(title: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", title.lower()).strip("-") or "switchyard"


def push_dashboards(
    url: str, token: str | None, folder: str = FOLDER, timeout_s: float = 30.0
) -> list[tuple[str, str]]:
    """Create the folder if needed and upload every dashboard (overwriting older versions);
    returns (uid, Grafana URL path) per dashboard."""
    from grafana_client.api import GrafanaApi
    from grafana_client.client import GrafanaClientError, GrafanaException

    api: Any = GrafanaApi.from_url(url, credential=token, timeout=timeout_s)
    uid = folder_uid(folder)
    try:
        try:
            api.folder.get_folder(uid)
        except GrafanaClientError as exc:
            if exc.status_code != 404:
                raise
            api.folder.create_folder(folder, uid=uid)
        pushed = []
        for dashboard in dashboards():
            reply = api.dashboard.update_dashboard(
                {
                    "dashboard": dashboard_json(dashboard),
                    "folderUid": uid,
                    "overwrite": True,
                    "message": "switchyard dashboards push",
                }
            )
            pushed.append((dashboard.uid, str(reply.get("url", ""))))
        return pushed
    except GrafanaException as exc:
        raise Rejected(f"Grafana at {url} refused the upload: {exc}") from None
    except OSError as exc:  # connection refused, DNS, TLS
        raise Rejected(f"cannot reach Grafana at {url}: {exc}") from None
