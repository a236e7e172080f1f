"""Where requests go and the key they carry: an OpenAI-compatible base URL and $OPENAI_API_KEY.

The key comes from the environment only; it is never printed, logged or written (`Endpoint.redact`
scrubs it from anything recorded). A key that cannot travel in an HTTP header (non-ASCII, a line
break or another control character) is a setup error at start, not a failure of every request.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import urlsplit, urlunsplit

from fsb.core.errors import FsbError
from fsb.core.logredact import install_log_redaction
from fsb.core.secrets import redact, register, safe_url, url_secrets

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
        """The base URL without user info, query string or fragment, as recorded in the output and printed."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return safe_url(urlunsplit((parts.scheme, netloc, parts.path, "", "")))  # ;token=... path parameters too

    @cached_property
    def secrets(self) -> tuple[str, ...]:
        """What `redact` hides: the key, and the user info and token-like query values of the base URL."""
        return tuple(s for s in (self.api_key, *url_secrets(self.base_url)) if s)

    def redact(self, text: str) -> str:
        """`text` with the key and the URL's credentials replaced by ***, in the forms a server echoes them in.

        Any letter case, percent-encoded, JSON/HTML-escaped, hex or base64 (see `fsb.core.secrets.redact`):
        a server that echoes the key never gets it written.

        Parameters
        ----------
        text
            An answer, a reason or any string about to be recorded.

        Returns
        -------
        str
            The text with every form of every secret replaced by ***.
        """
        return redact(text, self.secrets)


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
    with non-ASCII, whitespace or control characters is an error everywhere. The key and the URL's
    credentials are registered with `fsb.core.secrets`, and from here on every log record and warning of
    the process is redacted (the HTTP clients print request URLs in their retry warnings); no message
    ever quotes the URL's user info or token-like query values.

    Parameters
    ----------
    base_url
        `--base-url` as given, or None.
    env
        The environment (default: os.environ).

    Returns
    -------
    Endpoint
        The endpoint, its URL without a trailing slash.
    """
    env = os.environ if env is None else env
    url = (base_url or env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").strip()
    key = env.get("OPENAI_API_KEY") or None
    register(key, *url_secrets(url))
    install_log_redaction()
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError as e:
        raise EngineError(f"--base-url is not a usable URL ({e}): {safe_url(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {safe_url(url)!r}")
    if key is not None:
        _check_key(key)
    endpoint = Endpoint(url.rstrip("/"), key)
    if key is None and not endpoint.local:
        raise EngineError(
            f"OPENAI_API_KEY is not set, and {endpoint.public_url} is not on this machine: set the key in the environment "
            "(it is never read from the command line). Only a local server (127.0.0.1, ::1, localhost) may run without one."
        )
    return endpoint
