"""The raw upstream release: find a local copy, or download it pinned by commit and checked by sha256.

Order for `release_dir()`: an explicit folder; $FSB_RAW_DIR; ../shared/data/fsb-upstream beside a
source checkout (where this project's tests and CI read it); the download cache
($FSB_HOME/release/<commit>), filled by `fetch_release()` on first use.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import fifty_shades_of_bias as spec
from fsb.core import resources
from fsb.core.atomic import atomic_write
from fsb.core.logredact import install_log_redaction
from fsb.core.readers import InputError, sha256_file
from fsb.core.secrets import redact_message, register, safe_url, url_secrets

__all__ = ["ANNOTATIONS", "GENERATIONS", "check_release", "fetch_release", "find_local_release", "release_dir", "verify_release"]

GENERATIONS = "FSB/FSB_text.csv"
ANNOTATIONS = "FSB/fsb-tuples-annotations.csv"


def _looks_like_release(folder: Path) -> bool:
    return (folder / GENERATIONS).is_file() and (folder / ANNOTATIONS).is_file()


def find_local_release() -> Path | None:
    """A release folder already on this machine: $FSB_RAW_DIR, the checkout's ../shared copy, or the cache."""
    candidates = []
    if os.environ.get("FSB_RAW_DIR"):
        candidates.append(Path(os.environ["FSB_RAW_DIR"]).expanduser())
    root = resources.repo_root()
    if root is not None:
        candidates.append(root.parent / "shared" / "data" / "fsb-upstream")
    candidates.append(spec.home() / "release" / spec.RELEASE["commit"])
    for folder in candidates:
        if _looks_like_release(folder):
            return folder.resolve()
    return None


def verify_release(folder: str | os.PathLike[str]) -> dict[str, bool]:
    """For every pinned file: does the copy in `folder` exist and match its sha256?"""
    root = Path(folder)
    return {
        rel: (root / rel).is_file() and (digest is None or sha256_file(root / rel) == digest)
        for rel, digest in spec.RELEASE["files"].items()
    }


def _request(url: str) -> urllib.request.Request:
    """A GET request for `url`; credentials in its user info travel as a Basic Authorization header."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    host = parts.netloc.rpartition("@")[2]
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    request = urllib.request.Request(urlunsplit((parts.scheme, host, parts.path, parts.query, "")))
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii"))
    return request


def _download(url: str, timeout: float, attempts: int = 3) -> bytes:
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(_request(url), timeout=timeout) as response:
                return response.read()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if isinstance(e, urllib.error.HTTPError) and e.code < 500 and e.code != 429:
                raise
            if attempt == attempts:
                raise
            time.sleep(2 ** (attempt - 1))
    raise AssertionError("unreachable")


def _source(template: str, rel: str) -> str:
    """The URL of one pinned file from the --url template; a template that does not format is bad input."""
    try:
        return template.format(commit=spec.RELEASE["commit"], path=rel)
    except (KeyError, IndexError, ValueError) as e:
        raise InputError(safe_url(template), f"not a URL template with {{commit}} and {{path}} only ({type(e).__name__}: {e})") from None


def fetch_release(dest: str | os.PathLike[str] | None = None, url: str | None = None, timeout: float = 60.0) -> Path:
    """Download every pinned file into `dest` (default: the cache), checking each sha256 before it lands.

    `url` (or $FSB_RELEASE_URL) is a template with {commit} and {path}, for a mirror. Files already
    present with the right hash are not fetched again; a wrong hash is an error and nothing is kept; a
    file already present with other content is refused, never overwritten. Credentials in the URL (user
    info, sent as Basic auth, or a token query) are never printed: messages name the URL through
    `fsb.core.secrets.safe_url` and redact whatever a server echoes.

    Parameters
    ----------
    dest
        The folder to fill (default: $FSB_HOME/release/<commit>).
    url
        The mirror's URL template (default: $FSB_RELEASE_URL, else the upstream repository).
    timeout
        Seconds per request.

    Returns
    -------
    Path
        The filled folder, resolved.
    """
    folder = Path(dest) if dest is not None else spec.home() / "release" / spec.RELEASE["commit"]
    template = url or os.environ.get("FSB_RELEASE_URL") or spec.RELEASE["url"]
    hidden = url_secrets(template)
    register(*hidden)
    install_log_redaction()
    for rel, digest in spec.RELEASE["files"].items():
        target = folder / rel
        if target.is_file() and (digest is None or sha256_file(target) == digest):
            continue
        if target.exists() or target.is_symlink():  # an edited copy or anything else: never replaced
            raise InputError(target, "differs from the pinned release; refusing to replace it: move it away or use another --dest")
        source = _source(template, rel)
        try:
            data = _download(source, timeout)
        except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError) as e:  # ValueError: http.client.InvalidURL
            why = redact_message(" ".join(str(e).split()), [*hidden, *url_secrets(source)])
            raise InputError(safe_url(source), f"download failed: {why}") from None
        got = hashlib.sha256(data).hexdigest()
        if digest is not None and got != digest:
            raise InputError(safe_url(source), f"sha256 mismatch: expected {digest}, got {got}; nothing was saved")
        atomic_write(target, data)
    return folder.resolve()


def release_dir(raw_dir: str | os.PathLike[str] | None = None) -> Path:
    """The release folder to build from: `raw_dir` if given, else a local copy, else a fresh download."""
    if raw_dir is not None:
        folder = Path(raw_dir).expanduser()
        if not folder.is_dir():
            raise InputError(folder, "release folder not found")
        for rel in (GENERATIONS, ANNOTATIONS):
            if not (folder / rel).is_file():
                raise InputError(folder / rel, "file not found in the release folder")
        return folder.resolve()
    return find_local_release() or fetch_release()


def check_release(folder: str | os.PathLike[str]) -> None:
    """Raise InputError naming the first pinned file of `folder` that is missing or fails its sha256."""
    for rel, ok in verify_release(folder).items():
        if not ok:
            raise InputError(Path(folder) / rel, "missing or its sha256 differs from the pinned release")
