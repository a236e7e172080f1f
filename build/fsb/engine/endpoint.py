"""Where requests go and the key they carry: an OpenAI-compatible base URL and $OPENAI_API_KEY.

The key comes from the environment only; it is never printed, logged or written (`Endpoint.redact`
scrubs it from anything recorded). A key that cannot travel in an HTTP header (non-ASCII, a line
break or another control character) is a setup error at start, not a failure of every request.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import unquote, urlsplit, urlunsplit

from fsb.core.errors import FsbError

__all__ = ["Endpoint", "EngineError", "resolve_endpoint"]

_LOCAL_HOSTS = {"localhost", "localhost.localdomain"}


class EngineError(FsbError):
    """A run's setup is wrong: no key for a remote endpoint, an unusable key, a locked or foreign journal, an output it may not replace."""


def _is_local(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() in _LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, and the key (from the environment only; never printed, logged or stored)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def local(self) -> bool:
        """On this machine (a loopback address or localhost): such a server may need no key."""
        return _is_local(urlsplit(self.base_url).hostname)

    @property
    def public_url(self) -> str:
        """The base URL without user info or query string, as recorded in the output."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    @cached_property
    def _secrets(self) -> re.Pattern[str] | None:
        password = urlsplit(self.base_url).password
        return secrets_pattern([s for s in (self.api_key, password, password and unquote(password)) if s])

    def redact(self, text: str) -> str:
        """`text` with the key (and any user info of the URL) replaced by ***, however a server echoes it:
        in any letter case, percent-encoded (%2D, %2d) or JSON-escaped (\\u002d) character by character."""
        pattern = self._secrets
        return text if pattern is None else pattern.sub("***", text)


def secrets_pattern(secrets: list[str]) -> re.Pattern[str] | None:
    """One case-insensitive pattern matching each secret with every character either as itself or as its
    percent-encoded or JSON \\u-escaped form; None when there is nothing to hide. Longest secrets first."""
    alternatives = []
    for secret in sorted(set(secrets), key=len, reverse=True):
        parts = []
        for ch in secret:
            pct = "".join(f"%{b:02x}" for b in ch.encode("utf-8"))
            esc = "".join(f"\\\\u{u:04x}" for u in _utf16(ch))
            parts.append(f"(?:{re.escape(ch)}|{pct}|{esc})")
        alternatives.append("".join(parts))
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _check_key(key: str) -> None:
    """Refuse a key an HTTP header cannot carry, naming the problem but never the key."""
    bad = next((i for i, c in enumerate(key) if not (" " < c < "\x7f")), None)
    if bad is not None:
        c = key[bad]
        what = "a line break" if c in "\r\n" else "a space or control character" if c.isascii() else "a non-ASCII character"
        raise EngineError(
            f"OPENAI_API_KEY holds {what} (at position {bad + 1} of {len(key)}); an HTTP header cannot carry it. "
            "Set the key again without it (copying from a document can add such characters)"
        )


def resolve_endpoint(base_url: str | None = None, env: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint from `--base-url` (else $OPENAI_BASE_URL, else OpenAI's) and the key from $OPENAI_API_KEY.

    A missing key is an error unless the endpoint is on this machine (127.0.0.1, ::1, localhost); a key
    with non-ASCII, whitespace or control characters is an error everywhere.
    """
    env = os.environ if env is None else env
    url = (base_url or env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {url!r}")
    key = env.get("OPENAI_API_KEY") or None
    if key is not None:
        _check_key(key)
    endpoint = Endpoint(url.rstrip("/"), key)
    if key is None and not endpoint.local:
        raise EngineError(
            f"OPENAI_API_KEY is not set, and {endpoint.public_url} is not on this machine: set the key in the environment "
            "(it is never read from the command line). Only a local server (127.0.0.1, ::1, localhost) may run without one."
        )
    return endpoint
