"""Write a small file so readers see the old content or the new, never a torn one.

The one atomic write of Switchyard: state files (fleet snapshot, stack info) and the staging
cache's bookkeeping (manifests, markers, reservations, pins) all go through it. `fsync_dir`
is its last step, for callers that rename files themselves.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8), creating its folder if needed.

    A temporary file beside `path` is written and fsynced, renamed over `path`, then the
    folder is fsynced, so after a crash or power loss `path` holds the old content or the new
    one in full. The temporary name is unique, so concurrent writers of one path do not share
    a temporary file: the last rename wins. Permissions are those `path.write_text` would
    leave: an existing file keeps its mode, a new one gets the umask's default.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(handle.fileno(), stat.S_IMODE(path.stat().st_mode))
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename, creation or deletion in `folder` durable (after `os.replace` etc.)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        # Some filesystems (certain NFS setups) refuse fsync on a directory; the rename stands.
        pass
    finally:
        os.close(fd)
