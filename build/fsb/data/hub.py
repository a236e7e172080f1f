"""The Hub client's small pieces shared by publish and download: listing a revision's files, comparing a
local file with a remote one, downloading one file, and keeping huggingface_hub's retry chatter off the
terminal (`quiet_retries`).

huggingface_hub retries a 5xx or a dropped connection five times and logs two warning lines per attempt
("HTTP Error 503 thrown while requesting ...", "Retrying in 8s [Retry 5/5]."), so a failing Hub printed 11
lines before fsb's own one-line error. `quiet_retries` holds them back for the duration of a command and
counts them; the command's error is then the first and only line about the failure.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsb.data.localbuild import LocalFile

__all__ = ["REPO_TYPE", "Retries", "download", "quiet_retries", "remote_tree", "same"]

REPO_TYPE = "dataset"
_RETRY = re.compile(r"Retrying in |thrown while requesting |Retry \d+/\d+")


@dataclass
class Retries:
    """How many retry warnings were held back (two per retried request)."""

    warnings: int = 0


class _HoldRetries(logging.Filter):
    def __init__(self, seen: Retries) -> None:
        super().__init__()
        self.seen = seen

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a record that cannot be formatted is left to the other handlers
            return True
        if _RETRY.search(text):
            self.seen.warnings += 1
            return False
        return True


@contextlib.contextmanager
def quiet_retries() -> Iterator[Retries]:
    """Hold back huggingface_hub's retry warnings (every logger under `huggingface_hub`) while the block runs;
    yields the count. Other warnings pass as before; the filter is removed afterwards."""
    import huggingface_hub.utils._http  # noqa: F401  (its module logger must exist before it is filtered)

    seen = Retries()
    hold = _HoldRetries(seen)
    loggers = [logging.getLogger("huggingface_hub")] + [
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict) if name.startswith("huggingface_hub.")
    ]
    # a logger's own filters see only its own records; with no handler configured the record goes to logging.lastResort
    handlers = (
        {h for lg in loggers for h in lg.handlers} | set(logging.root.handlers) | ({logging.lastResort} if logging.lastResort else set())
    )
    for lg in loggers:
        lg.addFilter(hold)
    for h in handlers:
        h.addFilter(hold)
    try:
        yield seen
    finally:
        for lg in loggers:
            lg.removeFilter(hold)
        for h in handlers:
            h.removeFilter(hold)


def remote_tree(api: Any, repo_id: str, revision: str) -> dict[str, Any]:
    from huggingface_hub.hf_api import RepoFile

    entries = api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=revision, recursive=True)
    return {e.path: e for e in entries if isinstance(e, RepoFile)}


def same(local: LocalFile, remote: Any) -> bool:
    if getattr(remote, "lfs", None):
        return remote.lfs.sha256 == local.sha256
    return remote.blob_id == local.git_oid


def download(api: Any, repo_id: str, path: str, revision: str, folder: Path) -> Path:
    """One remote file at `revision`, downloaded into `folder` (a temporary cache; nothing is kept)."""
    return Path(api.hf_hub_download(repo_id, path, repo_type=REPO_TYPE, revision=revision, cache_dir=str(folder)))
