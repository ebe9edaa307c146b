"""A Hugging Face Hub stand-in on 127.0.0.1 for staging tests: no test reaches the internet.

It speaks the part of the Hub's HTTP API that `HfApi.model_info(files_metadata=True)`,
`list_repo_tree` and `snapshot_download` use (checked against huggingface_hub's source):

- GET  /api/models/{org}/{name}[/revision/{rev}]   model info, siblings with sizes and LFS
- GET  /api/models/{org}/{name}/tree/{rev}[/path]  the file tree (`recursive` honoured)
- HEAD /{org}/{name}/resolve/{rev}/{file}          X-Repo-Commit, ETag, Content-Length
- GET  /{org}/{name}/resolve/{rev}/{file}          the bytes, with HTTP Range (206) for resume

Files are served as plain HTTP/LFS, never Xet (no X-Xet-* headers), so huggingface_hub takes
its HTTP path. Faults can be injected per file: drop the connection after N bytes (once),
stall after N bytes until released (to kill a client mid-file), or serve other content than
the manifest announces (a wrong size or hash).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_LFS_POINTER_SIZE = 134


@dataclass
class LocalRepo:
    repo_id: str
    files: dict[str, bytes]
    lfs_paths: frozenset[str]
    commit: str

    def is_lfs(self, path: str) -> bool:
        return path in self.lfs_paths

    def etag(self, path: str) -> str:
        content = self.files[path]
        if self.is_lfs(path):
            return hashlib.sha256(content).hexdigest()
        return git_blob_sha1(content)


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    range: str | None


@dataclass
class Faults:
    drop_after: dict[str, int] = field(default_factory=dict)
    """repo_id/file -> bytes sent before the connection is cut; each fires once."""
    stall_after: dict[str, int] = field(default_factory=dict)
    """repo_id/file -> bytes sent before the response pauses until `release` is set."""
    served_content: dict[str, bytes] = field(default_factory=dict)
    """repo_id/file -> bytes /resolve serves instead of the real file (API keeps the real size)."""


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class LocalHub:
    """Start with `with LocalHub() as hub:`; `hub.url` is the HF_ENDPOINT to use."""

    def __init__(self) -> None:
        self.repos: dict[str, LocalRepo] = {}
        self.faults = Faults()
        self.requests: list[RequestRecord] = []
        self.stalled = threading.Event()
        """Set when a stalled response has sent its first bytes."""
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- content ----

    def add_repo(
        self, repo_id: str, files: dict[str, bytes], *, lfs_min_bytes: int = 1024
    ) -> LocalRepo:
        """Files of `lfs_min_bytes` or more (and every .safetensors) are LFS, as on the Hub."""
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(files):
            digest.update(path.encode() + files[path])
        lfs = frozenset(
            path
            for path, content in files.items()
            if len(content) >= lfs_min_bytes or path.endswith(".safetensors")
        )
        repo = LocalRepo(repo_id, dict(files), lfs, digest.hexdigest())
        self.repos[repo_id] = repo
        return repo

    def resolve_requests(self, repo_id: str, path: str | None = None) -> list[RequestRecord]:
        prefix = f"/{repo_id}/resolve/"
        with self._lock:
            records = list(self.requests)
        return [
            record
            for record in records
            if record.path.startswith(prefix) and (path is None or record.path.endswith(f"/{path}"))
        ]

    def downloads(self, repo_id: str, path: str | None = None) -> list[RequestRecord]:
        return [r for r in self.resolve_requests(repo_id, path) if r.method == "GET"]

    # ---- lifecycle ----

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LocalHub:
        hub = self

        class Handler(_HubHandler):
            local_hub = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def record(self, method: str, path: str, range_header: str | None) -> None:
        with self._lock:
            self.requests.append(RequestRecord(method, path, range_header))


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    local_hub: LocalHub

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean

    # ---- routing ----

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def _dispatch(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        self.local_hub.record(self.command, path, self.headers.get("Range"))
        query = parse_qs(url.query)
        if path.startswith("/api/models/"):
            self._api(path.removeprefix("/api/models/"), query)
        elif "/resolve/" in path:
            self._resolve(path.lstrip("/"), head=head)
        else:
            self._error(404, "RepoNotFound", "unknown route")

    # ---- API ----

    def _api(self, rest: str, query: dict[str, list[str]]) -> None:
        parts = rest.split("/")
        repo = self.local_hub.repos.get("/".join(parts[:2]))
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return
        tail = parts[2:]
        if not tail or tail[0] == "revision":
            revision = "/".join(tail[1:]) if tail else "main"
            if not self._revision_ok(repo, revision):
                return
            self._json(self._model_info(repo, with_blobs="blobs" in query))
        elif tail[0] == "tree" and len(tail) >= 2:
            if not self._revision_ok(repo, tail[1]):
                return
            folder = "/".join(tail[2:])
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            self._json(self._tree(repo, folder, recursive))
        else:
            self._error(404, "EntryNotFound", "unknown API route")

    def _model_info(self, repo: LocalRepo, *, with_blobs: bool) -> dict[str, Any]:
        siblings = []
        for path, content in repo.files.items():
            sibling: dict[str, Any] = {"rfilename": path}
            if with_blobs:
                sibling["size"] = len(content)
                sibling["blobId"] = git_blob_sha1(content)
                if repo.is_lfs(path):
                    sibling["lfs"] = {
                        "sha256": hashlib.sha256(content).hexdigest(),
                        "size": len(content),
                        "pointerSize": _LFS_POINTER_SIZE,
                    }
            siblings.append(sibling)
        return {
            "_id": repo.commit[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": repo.commit,
            "private": False,
            "siblings": siblings,
        }

    def _tree(self, repo: LocalRepo, folder: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = f"{folder}/" if folder else ""
        entries: list[dict[str, Any]] = []
        folders: set[str] = set()
        for path, content in repo.files.items():
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :]
            if "/" in rest:
                parents = rest.split("/")[:-1]
                depth = len(parents) if recursive else 1
                for index in range(depth):
                    folders.add(prefix + "/".join(parents[: index + 1]))
                if not recursive:
                    continue
            entry: dict[str, Any] = {
                "type": "file",
                "oid": git_blob_sha1(content),
                "size": len(content),
                "path": path,
            }
            if repo.is_lfs(path):
                entry["lfs"] = {
                    "oid": hashlib.sha256(content).hexdigest(),
                    "size": len(content),
                    "pointerSize": _LFS_POINTER_SIZE,
                }
            entries.append(entry)
        directories = [
            {"type": "directory", "oid": hashlib.sha1(name.encode()).hexdigest(), "path": name}
            for name in sorted(folders)
        ]
        return directories + entries

    # ---- file downloads ----

    def _resolve(self, rest: str, *, head: bool) -> None:
        repo_part, _, tail = rest.partition("/resolve/")
        repo = self.local_hub.repos.get(repo_part)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return
        revision, _, file_path = tail.partition("/")
        if not self._revision_ok(repo, revision):
            return
        if file_path not in repo.files:
            self._error(404, "EntryNotFound", "Entry not found", commit=repo.commit)
            return
        key = f"{repo.repo_id}/{file_path}"
        faults = self.local_hub.faults
        content = faults.served_content.get(key, repo.files[file_path])
        start, end = 0, len(content) - 1
        status = 200
        range_header = self.headers.get("Range")
        if range_header and content:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header.strip())
            if match:
                start = int(match.group(1))
                end = int(match.group(2)) if match.group(2) else end
                status = 206
        body = content[start : end + 1]
        self.send_response(status)
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("ETag", f'"{repo.etag(file_path)}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(content)}")
        self.end_headers()
        if head:
            return
        self._send_body(key, body)

    def _send_body(self, key: str, body: bytes) -> None:
        hub = self.local_hub
        drop_at = hub.faults.drop_after.pop(key, None)
        stall_at = hub.faults.stall_after.get(key)
        if drop_at is not None and drop_at < len(body):
            self.wfile.write(body[:drop_at])
            self.wfile.flush()
            self.close_connection = True
            return
        sent = 0
        try:
            if stall_at is not None and stall_at < len(body):
                self.wfile.write(body[:stall_at])
                self.wfile.flush()
                sent = stall_at
                hub.stalled.set()
                hub.release.wait(timeout=120)
            self.wfile.write(body[sent:])
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (killed, in some tests)

    # ---- helpers ----

    def _revision_ok(self, repo: LocalRepo, revision: str) -> bool:
        if revision in ("main", repo.commit):
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return False

    def _json(self, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, commit: str | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
