"""Secrets never leave the process: one redaction of the forms a key is printed in, one URL sanitiser.

Secrets come from the environment ($OPENAI_API_KEY, $HF_TOKEN, credentials inside $OPENAI_BASE_URL,
$HF_ENDPOINT, $FSB_RELEASE_URL and proxy URLs) or are registered where they are resolved (`register`).
`redact` replaces a secret with ``***`` in the forms a URL, a header, a log record, an error or a server
echoing it (into a response fsb stores) writes it in:

- as is and in any letter case;
- percent-encoded (URL-encoded), JSON-escaped (``\\uXXXX``, ``\\"``, ``\\\\``, ``\\/``) and HTML-escaped
  (``&amp;``, ``&lt;``, ``&gt;``, ``&quot;``, ``&apos;``, ``&#NN;``, ``&#xHH;``), character by character
  in any mixture;
- hex of its UTF-8 bytes, in any case (from `MIN_SECRET` bytes on);
- base64 and base64url, padded or not, of the key alone or inside a longer blob (``user:key``, the
  Basic auth header): the whole base64 word holding it goes (from `MIN_SECRET` bytes on).

Other encodings (base32, base85, rot13, reversed, compressed, split by separators or zero-width
characters, wrapped across lines) are not looked for: no HTTP client, server or logger writes a key so.
`safe_url` prints a URL without its user info and without the values of token-like query and
``;name=`` parameters; `redact_message` does both for any text about to be printed (the environment's
secrets, the registered ones and every URL in it); `fsb.core.logredact` passes every log record and
warning through it. The environment's secrets shorter than `MIN_SECRET` characters are not searched
for in every message (they would match ordinary words); `safe_url` still removes them from URLs.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable, Mapping

__all__ = ["MIN_SECRET", "REDACTED", "env_secrets", "redact", "redact_message", "register", "safe_url", "secrets_pattern", "url_secrets"]

REDACTED = "***"
MIN_SECRET = 4
SECRET_ENV = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_API_TOKEN")
URL_ENV = ("OPENAI_BASE_URL", "HF_ENDPOINT", "FSB_RELEASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
_TOKEN_WORDS = ("token", "secret", "passw", "pwd", "signature", "credential", "auth", "apikey", "api_key", "api-key", "session")
_TOKEN_NAMES = frozenset({"key", "sig", "code", "jwt", "bearer", "hf", "x-amz-signature", "x-amz-security-token"})
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_COLLAPSED_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*:/)(?!/)[^/\s'\"<>`@]+@")
_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}  # what HTML escapers write by name
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_WORD = re.compile(r"[A-Za-z0-9+/]*(?:=|%3[dD]){0,2}")
_B64URL_WORD = re.compile(r"[A-Za-z0-9+/_-]*(?:=|%3[dD]){0,2}")
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def _char_forms(ch: str) -> str:
    """A regex for one character of a secret: itself (any case) or percent-encoded, JSON- or HTML-escaped."""
    units = ch.encode("utf-16-be", "surrogatepass")
    forms = [  # escaped forms first: an alternation takes the first that matches (\\u005c, not its backslash)
        "".join(f"%{b:02x}" for b in ch.encode("utf-8", "surrogatepass")),
        "".join(f"\\\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)),
        f"&\\#0*{ord(ch)};?",
        f"&\\#x0*{ord(ch):x};?",
    ]
    if ch in '"\\/':
        forms.append(re.escape("\\" + ch))  # JSON's short escapes
    if ch in _HTML_NAMED:
        forms.append(f"&{_HTML_NAMED[ch]};")
    cased = sorted({v for v in (ch.upper(), ch.lower(), ch.casefold()) if len(v) > 1}, key=len, reverse=True)  # ß -> SS
    return "(?:" + "|".join([*forms, *map(re.escape, cased), re.escape(ch)]) + ")"


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters that encode `data` alone at each of its 3 byte offsets inside a longer blob
    (the one or two characters at each edge, which mix in neighbouring bits, are left out)."""
    import base64

    cores = set()
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + data).decode("ascii")
        start, end = -(-8 * k // 6), 8 * (k + len(data)) // 6
        if end - start >= 6:
            cores.add(encoded[start:end])
    return cores


def _b64_char(c: str) -> str:
    """One base64 character in either alphabet, its slash also JSON-escaped or either percent-encoded."""
    if c == "+":
        return r"(?:\+|-|%2[bB])"
    return r"(?:/|_|\\/|%2[fF])" if c == "/" else c


@functools.lru_cache(maxsize=64)
def _compiled(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    text_forms, b64_forms = [], []
    for secret in secrets:
        text_forms.append("".join(map(_char_forms, secret)))
        data = secret.encode("utf-8", "surrogatepass")
        if len(data) >= MIN_SECRET:
            text_forms.append(data.hex())
            b64_forms += ["".join(map(_b64_char, core)) for core in sorted(_base64_cores(data), key=len, reverse=True)]
    if not text_forms:
        return None
    b64 = f"|(?P<b64>(?-i:{'|'.join(b64_forms)}))" if b64_forms else ""
    return re.compile("|".join(text_forms) + b64, re.IGNORECASE)


def _usable(secrets: Iterable[str | None]) -> tuple[str, ...]:
    from urllib.parse import unquote

    found = {s for s in secrets if isinstance(s, str) and s}
    found |= {unquote(s) for s in found}
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def secrets_pattern(secrets: Iterable[str | None]) -> re.Pattern[str] | None:
    """One compiled pattern (cached) matching every form of `secrets` that `redact` removes, a base64 one as
    group ``b64``; None when there is nothing to hide. None and empty secrets are skipped; each is matched as
    text whatever its length, its hex and base64 forms only from `MIN_SECRET` bytes on."""
    return _compiled(_usable(secrets))


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every form of every secret replaced by ``***`` (see the module docstring for the forms).

    A base64 form takes the whole base64 word around it (``Basic dXNlcjpr...=`` becomes ``Basic ***``),
    so no edge character is left; the word stops at a ``-`` or ``_`` unless the key's own characters are
    base64url (an id prefix such as ``chatcmpl-`` is kept).

    Parameters
    ----------
    text
        Any text: an answer, an error message, a log line, a header.
    secrets
        The secrets to hide (None and empty ones are ignored).

    Returns
    -------
    str
        The text, with everything else exactly as it was.
    """
    pattern = _compiled(_usable(secrets))
    if pattern is None or not text:
        return text
    out, last, pos = [], 0, 0
    while (m := pattern.search(text, pos)) is not None:
        start, end = m.span()
        if m.lastgroup == "b64":  # the whole base64 word: no edge character that mixes in the key's bits is left
            urlsafe = any(c in "-_" for c in m[0])
            before = text[last:start]
            start -= len(before) - len(before.rstrip(_B64 + "-_" if urlsafe else _B64))
            end = (_B64URL_WORD if urlsafe else _B64_WORD).match(text, end).end()
        out += [text[last:start], REDACTED]
        last = pos = end
    return "".join(out) + text[last:] if out else text


def _token_like(name: str) -> bool:
    from urllib.parse import unquote_plus

    name = unquote_plus(name).strip().lower()
    return name in _TOKEN_NAMES or name.endswith(("key", "_sig", "-sig")) or any(w in name for w in _TOKEN_WORDS)


_PATH_PARAM = re.compile(r";([^;/=?#]*)=([^;/?#]*)")  # matrix parameters: /v1;token=VALUE/x


def _safe_params(query: str) -> str:
    pieces = []
    for piece in query.split("&"):
        name, eq, _ = piece.partition("=")
        pieces.append(f"{name}={REDACTED}" if eq and _token_like(name) else piece)
    return "&".join(pieces)


def safe_url(url: str) -> str:
    """`url` as it may be printed: user info replaced by ``***@``, token-like query and path (``;name=``)
    parameter values by ``***``, any fragment by ``#***``; a URL that does not parse as its scheme and ``***``.

    Call it for every URL that is printed, logged or recorded (an output row's ``base_url`` too).
    Token-like parameters are named token, key, api_key, access_token, sig, signature, secret, password,
    auth..., in any case. The scheme, host, port and path are kept, so a message still says where.

    Parameters
    ----------
    url
        Any URL (or text that failed to parse as one).

    Returns
    -------
    str
        The printable URL.
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:  # the rest may be anything (a credential in a broken host): the scheme only
        scheme = re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", url)
        return f"{scheme[0]}//{REDACTED}" if scheme else REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    path = _PATH_PARAM.sub(lambda m: f";{m[1]}={REDACTED}" if _token_like(m[1]) else m[0], parts.path)
    safe = urlunsplit((parts.scheme, netloc, path, _safe_params(parts.query), ""))
    return f"{safe}#{REDACTED}" if parts.fragment or url.endswith("#") else safe


def url_secrets(url: str | None) -> list[str]:
    """The secrets `url` (or None) carries, each as written and percent-decoded: its password (or a user
    name without one), and the values of its token-like query, fragment and ``;name=`` parameters."""
    if not url:
        return []
    from urllib.parse import unquote, unquote_plus, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    # A user name beside a password is a name; alone (https://TOKEN@host) it is the credential.
    found: list[str | None] = [parts.password] if parts.password else [parts.username]
    for query in (parts.query, parts.fragment):
        for piece in query.split("&"):
            name, eq, value = piece.partition("=")
            if eq and value and _token_like(name):
                found += [value, unquote_plus(value)]
    for m in _PATH_PARAM.finditer(parts.path):
        if m[2] and _token_like(m[1]):
            found += [m[2], unquote(m[2])]
    return [s for s in dict.fromkeys(found) if s]


def register(*secrets: str | None) -> None:
    """Add secrets resolved at run time (a key, a token, a URL's credentials; None and empty ones are
    ignored) to those `redact_message` hides."""
    with _LOCK:
        _REGISTERED.update(s for s in secrets if s)


def env_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of `env` (default: os.environ), registered ones included: the key and token variables,
    and the credentials in URL variables; those under `MIN_SECRET` characters are left out."""
    env = os.environ if env is None else env
    found = [env.get(name) or "" for name in SECRET_ENV]
    found += [s.strip() for s in found]
    for name in URL_ENV:
        found += url_secrets(env.get(name))
    with _LOCK:
        found += sorted(_REGISTERED)
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET]


def redact_message(text: str, secrets: Iterable[str | None] = ()) -> str:
    """A message fit to print: `secrets`, the environment's and the registered ones redacted, every URL made safe.

    Parameters
    ----------
    text
        A message about to be printed, logged or written.
    secrets
        Further secrets known to the caller (a token passed as an argument).

    Returns
    -------
    str
        The safe message.
    """
    text = redact(text, [*secrets, *env_secrets()])
    text = _URL.sub(lambda m: safe_url(m[0]), text) if "://" in text else text
    # A URL a path has collapsed ("https:/user:pass@host": pathlib keeps one slash) still carries its user info
    return _COLLAPSED_USERINFO.sub(lambda m: f"{m[1]}{REDACTED}@", text) if ":/" in text else text
