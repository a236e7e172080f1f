"""Secrets never leave the process: one redaction for every form a client could undo, one URL sanitiser.

(size: about 420 lines, one module, so that every encoding the redaction knows is listed in one place;
the search of decoded, inflated and whitespace-wrapped forms is `fsb.core.wrapped`; the log redaction
built on it is `fsb.core.logredact`.)

Secrets come from the environment only ($OPENAI_API_KEY, $HF_TOKEN, credentials inside $OPENAI_BASE_URL,
$HF_ENDPOINT, $FSB_RELEASE_URL and proxy URLs) or are registered where they are resolved (`register`).
`redact` replaces a secret with ``***`` in every form a reader could turn back into it:

- as is and in any letter case;
- character by character percent-encoded (also double-encoded, ``%252D``), ``\\uXXXX`` / ``\\xHH``
  escaped (JSON and Python), JSON's short escapes (``\\/``, ``\\"``), HTML entities (named, decimal and
  hex, with or without the ``;``), in any mixture of these;
- split by zero-width characters (U+200B..U+200D, U+2060, U+FEFF) or soft hyphens, raw or encoded;
- hex (the UTF-8 bytes, any case), together or apart (``73:6b``, ``0x73 0x6b``, ``%73 %6b``, ``\\x73,\\x6b``);
- base64, standard and URL-safe, with or without padding, alone or inside a longer blob at each of
  the three byte alignments: the characters that depend on the secret's bytes only are removed (at most
  the one or two characters at each edge, which mix in neighbouring bytes, are left); base32 (any case,
  the 5 alignments) and base85 / ascii85 (the 4 alignments) the same way;
- base64, hex or base32 runs with whitespace or newlines inside, real or escaped (a JSON string's ``\\n``,
  ``%0A``), the last line as short as one character after lines of four or more (matched with the
  separators removed; the fewest whole words that decode to the secret are replaced, so a word beside
  the blob is kept);
- base64 runs (12 characters or more) that decode to gzip (every member), zlib or raw deflate data
  holding the secret in any of these forms (decompressed up to `INFLATE_CAP` bytes): the whole run is
  replaced. (A raw deflate of a key of 8 to 14 characters is 16 to 20 base64 characters; only a key of
  a few repeated characters deflates to fewer than 12, and that form is not looked into.)

Fuzzy forms, for secrets of `FUZZY_MIN` characters or more only (a shorter one would match ordinary
text): NFKC compatibility forms (fullwidth ``ｓｋ－``, ligatures...), rot13, reversed (and both), and
the characters separated by one repeated separator of one to three non-alphanumeric characters
(``s k - f``, ``s-k---f``, ``s.k.-.f``, zero-width characters), in any letter case.

`safe_url` prints a URL without its user info and without the values of token-like query parameters;
`redact_message` does both for any text about to be printed (the environment's secrets, the registered
ones and every URL in it); `fsb.core.logredact` passes every log record and warning through it. The
environment's secrets shorter than `MIN_SECRET` characters are not searched for in every
message (they would match ordinary words); `safe_url` still removes them from URLs.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping

from fsb.core.wrapped import B64_RUN, INFLATE_CAP, b64_secret_head, fuzzy_spans, spaced_spans

__all__ = [
    "FUZZY_MIN",
    "INFLATE_CAP",
    "MIN_SECRET",
    "REDACTED",
    "env_secrets",
    "redact",
    "redact_message",
    "register",
    "safe_url",
    "secrets_pattern",
    "url_secrets",
]

REDACTED = "***"
MIN_SECRET = 4
FUZZY_MIN = 8
SECRET_ENV = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_API_TOKEN")
URL_ENV = ("OPENAI_BASE_URL", "HF_ENDPOINT", "FSB_RELEASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
JOINERS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"  # zero-width space/non-joiner/joiner, word joiner, BOM, soft hyphen
_TOKEN_WORDS = ("token", "secret", "passw", "pwd", "signature", "credential", "auth", "apikey", "api_key", "api-key", "session")
_TOKEN_NAMES = frozenset({"key", "sig", "code", "jwt", "bearer", "hf", "x-amz-signature", "x-amz-security-token"})
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_COLLAPSED_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*:/)(?!/)[^/\s'\"<>`@]+@")
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


@functools.cache
def _entity_names() -> dict[str, list[str]]:
    """A character -> its HTML5 entity names ("&lowbar;", "&period;"...), on first use (not at every start)."""
    import html.entities

    names: dict[str, list[str]] = {}
    for name, value in html.entities.html5.items():
        if len(value) == 1:
            names.setdefault(value, []).append(name)
    return names


def _char_forms(ch: str) -> list[str]:
    """Regex alternatives for one character: itself and each escaped or encoded form of it."""
    utf8 = ch.encode("utf-8", "surrogatepass")
    data = ch.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    cp = ord(ch)
    forms = [  # encoded forms first: an alternation takes the first that matches (\\x5c, not its backslash)
        "".join(f"%(?:25)*{b:02x}" for b in utf8),  # percent-encoded, at any depth
        "".join(f"\\\\x{b:02x}" for b in utf8),  # \xHH
        "".join(f"\\\\u{u:04x}" for u in units),  # JSON / Python \uXXXX
        f"\\\\U{cp:08x}",
        f"\\\\u\\{{0*{cp:x}\\}}",  # JavaScript \u{...}
        f"&\\#0*{cp};?",
        f"&\\#x0*{cp:x};?",
    ]
    if ch in "\"\\/'":
        forms.append(re.escape("\\" + ch))  # JSON's and Python's short escapes
    forms += [re.escape("&" + name) for name in sorted(_entity_names().get(ch, []), key=len, reverse=True)]
    cased = sorted({v for v in (ch.upper(), ch.lower(), ch.casefold()) if len(v) > 1}, key=len, reverse=True)  # ß -> SS
    return [*forms, *map(re.escape, cased), re.escape(ch)]


@functools.cache
def _gap() -> str:
    return "(?:" + "|".join(f for j in JOINERS for f in _char_forms(j)) + ")*"


def _charwise(secret: str) -> str:
    return _gap().join("(?:" + "|".join(_char_forms(ch)) + ")" for ch in secret)


def _base64_cores(data: bytes) -> set[tuple[str, str]]:
    """(core, tail) for each of the 3 byte offsets of `data` inside a longer base64 blob: the core is the
    characters that encode `data` alone; the tail (a last partial character and its padding) is what
    follows when the blob ends with `data`."""
    import base64

    cores = set()
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + data).decode("ascii")
        start = -(-8 * k // 6)
        end = 8 * (k + len(data)) // 6
        if end - start >= 6:
            cores.add((encoded[start:end], encoded[end:].rstrip("=")))
    return cores


def _block_cores(data: bytes) -> list[tuple[str, bool]]:
    """(core, case-sensitive) for base32 at its 5 byte alignments (bits: the characters between the
    secret's first and last whole 5-bit group) and base85 / ascii85 at their 4 (the whole 4-byte groups)."""
    import base64

    cores: list[tuple[str, bool]] = []
    for k in range(5):
        encoded = base64.b32encode(b"\0" * k + data).decode("ascii")
        start, end = -(-8 * k // 5), 8 * (k + len(data)) // 5
        if end - start >= 8:
            cores.append((encoded[start:end], False))
    for encode in (base64.b85encode, base64.a85encode):
        for k in range(4):
            first, last = -(-k // 4), (k + len(data)) // 4  # the whole groups inside the secret
            if last - first >= 2:
                encoded = encode(b"\0" * k + data + b"\0" * 4).decode("ascii")
                cores.append((encoded[5 * first : 5 * last], True))
    return cores


def _b64_char(c: str) -> str:
    if c == "+":
        return r"(?:\+|-|%2[bB]|\\u002[bB])"
    if c == "/":
        return r"(?:/|_|\\/|%2[fF]|\\u002[fF])"
    return c


@functools.lru_cache(maxsize=64)
def _compiled(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    alternatives = []
    for secret in secrets:
        alternatives.append(_charwise(secret))
        data = secret.encode("utf-8", "surrogatepass")
        if len(data) >= MIN_SECRET:
            # hex, its bytes written together or apart ("73:6b", "73 6b", "0x73 0x6b", "%73 %6b", "\\x73, \\x6b")
            alternatives.append("(?:" + r"(?:[:\s,.;-]{0,3}(?:0x|\\x|%)?)".join(f"{b:02x}" for b in data) + ")")
            for core, tail in sorted(_base64_cores(data), key=lambda ct: -len(ct[0])):
                end = f"(?:{tail}(?:=|%3[dD])*(?![A-Za-z0-9+/]))?" if tail else ""
                alternatives.append("(?-i:" + "".join(_b64_char(c) for c in core) + end + ")")
            for core, cased in _block_cores(data):
                alternatives.append(f"(?-i:{re.escape(core)})" if cased else re.escape(core))
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


def _usable(secrets: Iterable[str | None]) -> tuple[str, ...]:
    from urllib.parse import unquote

    found = {s for s in secrets if isinstance(s, str) and s}
    found |= {unquote(s) for s in found}
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def secrets_pattern(secrets: Iterable[str | None]) -> re.Pattern[str] | None:
    """One pattern matching every form of every secret that `redact` removes.

    Parameters
    ----------
    secrets
        The secrets; None and empty ones are skipped. Each is matched in every character-wise form
        whatever its length; its hex and base64 forms only from `MIN_SECRET` bytes on.

    Returns
    -------
    re.Pattern or None
        The compiled pattern (cached), or None when there is nothing to hide.
    """
    return _compiled(_usable(secrets))


@functools.lru_cache(maxsize=64)
def _fuzzy(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """The fuzzy forms of the secrets of `FUZZY_MIN` characters or more, matched in the NFKC view of a
    text: each secret, its rot13, reversed and both, as is or with one repeated separator between characters."""
    alternatives: list[str] = []
    group = 0
    for secret in secrets:
        plain = unicodedata.normalize("NFKC", secret)
        if len(plain) < FUZZY_MIN:
            continue
        forms = [f(s) for s in (secret, plain) for f in (str, lambda t: codecs.encode(t, "rot13"))]
        forms += [f[::-1] for f in forms]  # the NFKC of each form and each form of the NFKC (ª is a; ¨ is 2 chars)
        forms += [g for f in forms for g in (f.upper(), f.lower()) if len(g) != len(f)]  # ß is S S upper-cased and spaced
        for form in dict.fromkeys(forms):
            units = [re.escape(unicodedata.normalize("NFKC", c)) for c in form]  # Ŀ is L· wherever it stands
            alternatives.append("".join(units))
            group += 1
            rest = "".join(f"(?P=s{group}){u}" for u in units[2:])
            alternatives.append(f"{units[0]}(?P<s{group}>[^A-Za-z0-9]{{1,3}}){units[1]}{rest}")
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each (merged) span replaced by ***."""
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            if end > last:
                last = end
            continue
        out += [text[last:start], REDACTED]
        last = end
    return "".join(out) + text[last:]


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every form of every secret replaced by ``***`` (see the module docstring for the forms).

    A base64 run that decodes to a secret of `MIN_SECRET` characters or more in any of these forms
    (nested base64 included, two levels) is replaced whole.

    Parameters
    ----------
    text
        Any text: an answer, an error message, a log line.
    secrets
        The secrets to hide (None and empty ones are ignored).

    Returns
    -------
    str
        The text, with everything else exactly as it was.
    """
    secrets = _usable(secrets)
    pattern = _compiled(secrets)
    if pattern is None or not text:
        return text
    inner = _compiled(tuple(s for s in secrets if len(s) >= MIN_SECRET))  # a short one would match random decoded bytes
    fuzzy = _fuzzy(secrets)
    heads: dict[str, str | None] = {}  # each base64 run decoded once, not once a pass

    def head(run: str) -> str | None:
        if run not in heads:
            heads[run] = b64_secret_head(run, inner, fuzzy)
        return heads[run]

    for _ in range(4):  # until nothing is left: a removal may join the pieces of a nested form
        clean = text  # whole base64 runs first: the pattern below would cut a blob's core out and leave its edges
        if inner is not None:
            clean = B64_RUN.sub(lambda m: m[0] if (kept := head(m[0])) is None else kept + REDACTED, clean)
            clean = _replace_spans(clean, spaced_spans(clean, inner, fuzzy))
        # fuzzy and exact forms in one pass: a fuzzy match inside an exact one ('"sk..' in '\\"sk..') leaves no edge
        clean = _replace_spans(clean, [*fuzzy_spans(clean, fuzzy), *(m.span() for m in pattern.finditer(clean) if m.end() > m.start())])
        if clean == text:
            break
        text = clean
    return text


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
    """The secrets a URL carries: its password (or a user name without one), and its token-like parameters' values.

    Parameters
    ----------
    url
        A URL, or None.

    Returns
    -------
    list of str
        Each secret as written in the URL and percent-decoded.
    """
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
    """Add secrets resolved at run time (a key, a token, a URL's credentials) to those `redact_message` hides.

    Parameters
    ----------
    *secrets
        The secrets; None and empty ones are ignored.
    """
    with _LOCK:
        _REGISTERED.update(s for s in secrets if s)


def env_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of the environment: the key and token variables, and the credentials in URL variables.

    Parameters
    ----------
    env
        The environment (default: os.environ).

    Returns
    -------
    list of str
        The secrets, registered ones included.
    """
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
