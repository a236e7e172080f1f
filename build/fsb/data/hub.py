"""The Hub client's small pieces shared by publish and download: the token (`resolve_token`), its errors as
one redacted line (`PublishError`, `redact`, `short_error`, `read_remote`), listing a revision's files,
comparing a local file with a remote one, downloading one file, and keeping huggingface_hub's retry
chatter off the terminal (`quiet_retries`).

huggingface_hub retries a 5xx or a dropped connection five times and logs two warning lines per attempt
("HTTP Error 503 thrown while requesting ...", "Retrying in 8s [Retry 5/5]."), so a failing Hub printed 11
lines before fsb's own one-line error. `quiet_retries` holds them back for the duration of a command and
counts them; the command's error is then the first and only line about the failure.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fsb.core.errors import FsbError
from fsb.data.localbuild import LocalFile

__all__ = [
    "REPO_TYPE",
    "PublishError",
    "Retries",
    "download",
    "offline_hint",
    "quiet_retries",
    "read_remote",
    "redact",
    "remote_errors",
    "remote_tree",
    "resolve_token",
    "same",
    "short_error",
    "status",
]

REPO_TYPE = "dataset"
_NOISE = re.compile(r" ?For more information check: \S+")  # the client's pointer to MDN's page on the status
_T = TypeVar("_T")
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


class PublishError(FsbError, RuntimeError):
    """A refused or failed publish. The message is one line and says what, if anything, changed on the Hub.

    `remote_changed` is False when the Hub is exactly as before (a refusal, or a failed write that was
    never applied or was rolled back) and True when it is not (e.g. the commit landed but the tag failed).
    """

    def __init__(self, message: str, *, remote_changed: bool = False, commit_oid: str | None = None):
        super().__init__(message)
        self.remote_changed = remote_changed
        self.commit_oid = commit_oid


def resolve_token(token: str | None) -> str | None:
    """The Hub token: `token`, else $HF_TOKEN (never a stored login), registered as a secret so that no
    message or log line prints it; None when unset or blank."""
    from fsb.core.logredact import install_log_redaction
    from fsb.core.secrets import register

    token = token if token is not None else os.environ.get("HF_TOKEN")
    register(token)
    install_log_redaction()  # huggingface_hub's retry warnings print the request URL (an --endpoint's credentials)
    return (token.strip() or None) if token else None


# --- errors as one redacted line ---------------------------------------------------------------------


def remote_errors() -> tuple[type[BaseException], ...]:
    """Exceptions a Hub call raises for HTTP, transport and offline errors (huggingface_hub 1.x and 2.x)."""
    from huggingface_hub.errors import HfHubHTTPError

    errors: list[type[BaseException]] = [HfHubHTTPError, OSError, ValueError]
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError, AttributeError):
            errors.append(importlib.import_module(name).HTTPError)
    return tuple(errors)


def status(e: BaseException) -> int | None:
    """The HTTP status of a Hub error, or None when there was no answer (offline, unreachable)."""
    return getattr(getattr(e, "response", None), "status_code", None)


def redact(text: str, token: str | None) -> str:
    """`text` fit to print: the token, the environment's secrets and every URL's credentials removed.

    The forms a client or server prints it in are covered (any case, percent-encoded, JSON/HTML-escaped,
    hex, base64 of it or of user:token: see `fsb.core.secrets.redact`), and every URL
    in the text loses its user info and token-like query values (an --endpoint carrying a token).

    Parameters
    ----------
    text
        A message about to be printed (a server's error, above all).
    token
        The Hub token in use, or None.

    Returns
    -------
    str
        The safe message.
    """
    from fsb.core.secrets import redact_message

    return redact_message(text, [token])


def short_error(e: BaseException, token: str | None) -> str:
    """An exception as one short line, with the token redacted (a server may echo it, even base64-encoded)."""
    text = _NOISE.sub("", redact(" ".join(str(e).split()), token)) or type(e).__name__
    return text[:400]


def read_remote(what: str, fn: Callable[[], _T], token: str | None) -> _T:
    """Run one read-only Hub call of the planning stage; turn its failure into a one-line PublishError."""
    try:
        return fn()
    except remote_errors() as e:
        raise PublishError(f"{what} failed: {short_error(e, token)}; nothing was changed{offline_hint(e)}") from None


def offline_hint(e: BaseException) -> str:
    """For a failure without an HTTP answer (offline, unreachable): where the checks that need no network are."""
    if status(e) is not None:
        return ""
    return " (the local checks alone need no network: `fsb publish --local`, or fsb.data.publish.check_local)"
