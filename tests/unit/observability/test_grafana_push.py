"""`switchyard dashboards push` against a local HTTP server that records what grafana-client
sends: the folder is created once, every dashboard is uploaded into it with the token."""

from __future__ import annotations

import json

import pytest

from switchyard.cli import main
from switchyard.observability.dashboards import dashboards
from tests.support.recording_http import Answer, Route, recording_server

JSON = "application/json"


def grafana(existing_folder: bool) -> Route:
    def route(method: str, path: str, body: bytes) -> Answer | None:
        if method == "GET" and path == "/api/folders/switchyard":
            if existing_folder:
                return 200, JSON, json.dumps({"uid": "switchyard", "title": "Switchyard"})
            return 404, JSON, json.dumps({"message": "folder not found"})
        if method == "POST" and path == "/api/folders":
            return 200, JSON, json.dumps({"uid": "switchyard", "title": "Switchyard"})
        if method == "POST" and path == "/api/dashboards/db":
            uid = json.loads(body)["dashboard"]["uid"]
            return 200, JSON, json.dumps({"status": "success", "uid": uid, "url": f"/d/{uid}"})
        return None

    return route


def test_push_creates_the_folder_and_uploads_every_dashboard_with_the_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with recording_server(grafana(existing_folder=False)) as server:
        code = main(["dashboards", "push", "--url", server.url, "--token", "T0KEN"])
    assert code == 0
    calls = [(r.method, r.path) for r in server.requests]
    assert ("POST", "/api/folders") in calls
    created = next(r for r in server.requests if r.path == "/api/folders").json()
    assert created == {"title": "Switchyard", "uid": "switchyard"}
    uploads = [r for r in server.requests if r.path == "/api/dashboards/db"]
    assert [u.json()["dashboard"]["uid"] for u in uploads] == [d.uid for d in dashboards()]
    for upload in uploads:
        assert upload.headers["authorization"] == "Bearer T0KEN"
        assert upload.json()["folderUid"] == "switchyard"
        assert upload.json()["overwrite"] is True
    assert "pushed switchyard-fleet: /d/switchyard-fleet" in capsys.readouterr().out


def test_push_into_an_existing_folder_does_not_create_it_again() -> None:
    with recording_server(grafana(existing_folder=True)) as server:
        assert main(["dashboards", "push", "--url", server.url]) == 0
    assert ("POST", "/api/folders") not in [(r.method, r.path) for r in server.requests]


def test_a_refusing_grafana_makes_push_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(method: str, path: str, body: bytes) -> Answer:
        return 401, JSON, json.dumps({"message": "invalid API key"})

    with recording_server(refuse) as server:
        assert main(["dashboards", "push", "--url", server.url, "--token", "bad"]) == 1
    assert "refused" in capsys.readouterr().err


def test_an_unreachable_grafana_makes_push_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with recording_server(lambda *_: None) as server:
        url = server.url
    assert main(["dashboards", "push", "--url", url, "--timeout-s", "2"]) == 1
    assert "cannot reach Grafana" in capsys.readouterr().err


def test_a_url_that_is_not_http_is_bad_input() -> None:
    assert main(["dashboards", "push", "--url", "ftp://grafana"]) == 2
