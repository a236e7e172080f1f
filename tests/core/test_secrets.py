"""fsb.core.secrets: every form a client could undo is redacted, everything else is kept; URLs are printed
without credentials; log records and warnings of the HTTP clients are redacted once installed."""

from __future__ import annotations

import base64
import html
import json
import logging
import subprocess
import sys
from collections.abc import Callable
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fsb.core import secrets
from fsb.core.secrets import REDACTED, redact, redact_message, safe_url, url_secrets

SECRET = "sk-fsb-test-7f3a9c0e-DO-NOT-LEAK"


def _zw(s: str, joiner: str) -> str:
    return joiner.join(s)


def _u_escapes(s: str, fmt: str = "04x") -> str:
    """Every character as JSON's \\uXXXX (a surrogate pair beyond the BMP), as JSON.stringify-style encoders write."""
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(data[i : i + 2], 'big'):{fmt}}" for i in range(0, len(data), 2))


# Each encoding a client (a browser, a JSON parser, base64 -d, xxd -r) undoes in one step.
ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "upper": str.upper,
    "lower": str.lower,
    "swapcase": str.swapcase,
    "percent": lambda s: quote(s, safe=""),
    "percent-every": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "percent-double": lambda s: "".join(f"%25{b:02x}" for b in s.encode()),
    "json": lambda s: json.dumps(s).strip('"'),
    "json-ascii": _u_escapes,
    "json-ascii-upper": lambda s: _u_escapes(s, "04X"),
    "json-dumps-ascii": lambda s: json.dumps(s, ensure_ascii=True)[1:-1],
    "python-x": lambda s: "".join(f"\\x{b:02x}" for b in s.encode()),
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "html-dec": lambda s: "".join(f"&#{ord(c)};" for c in s),
    "html-dec-nosemi": lambda s: "".join(f"&#{ord(c)}" for c in s),
    "html-hex": lambda s: "".join(f"&#x{ord(c):x};" for c in s),
    "html-HEX-padded": lambda s: "".join(f"&#X{ord(c):06X};" for c in s),
    "html-escape": lambda s: html.escape(s).replace("-", "&#45;").replace("_", "&lowbar;").replace(".", "&period;"),
    "zero-width-space": lambda s: _zw(s, "\u200b"),
    "zwnj": lambda s: _zw(s, "\u200c"),
    "zwj": lambda s: _zw(s, "\u200d"),
    "word-joiner": lambda s: _zw(s, "\u2060"),
    "bom": lambda s: _zw(s, "\ufeff"),
    "soft-hyphen": lambda s: _zw(s, "\u00ad"),
    "zw-as-entity": lambda s: _zw(s, "&#8203;"),
    "zw-json": lambda s: _zw(s, "\\u200b"),
    "shy-named": lambda s: _zw(s, "&shy;"),
    "b64": lambda s: base64.b64encode(s.encode()).decode(),
    "b64-nopad": lambda s: base64.b64encode(s.encode()).decode().rstrip("="),
    "b64url": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
    "b64url-nopad": lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
    "b64-json-slash": lambda s: base64.b64encode(s.encode()).decode().replace("/", "\\/"),
    "b64-of-basic": lambda s: base64.b64encode(b"user:" + s.encode()).decode(),
    "b64-of-b64": lambda s: base64.b64encode(base64.b64encode(s.encode())).decode(),
}


def _blob(prefix: bytes, s: str, suffix: bytes, urlsafe: bool) -> str:
    enc = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return enc(prefix + s.encode() + suffix).decode()


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_every_encoding_is_redacted_and_the_text_around_it_kept(name: str) -> None:
    encoded = ENCODINGS[name](SECRET)
    assert redact(f"the key is {encoded} (keep it)", [SECRET]) == f"the key is {REDACTED} (keep it)"


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("after", [0, 1, 2, 5])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_a_secret_inside_a_longer_base64_blob_is_redacted_at_every_alignment(offset: int, after: int, urlsafe: bool) -> None:
    """Today only the plain forms are matched; inside a blob the key's base64 differs at byte offsets 0/1/2."""
    blob = _blob(b"\xfa" * (3 + offset), SECRET, b"\x07" * after, urlsafe)
    out = redact(f"token={blob};", [SECRET])
    assert out.startswith("token=") and out.endswith(";") and REDACTED in out
    for run in out[len("token=") : -1].split(REDACTED):  # what is left of the blob decodes to at most 2 key bytes
        assert len(run) <= 6
    # a run of the blob that starts mid-way (a log line cut at any character) is redacted too
    for cut in range(4):
        assert REDACTED in redact(blob[cut:], [SECRET])


def test_ordinary_text_and_other_base64_are_untouched() -> None:
    text = "An ordinary sentence about sk-fsb keys, aGVsbG8gd29ybGQgdGhpcyBpcyBub3QgYSBzZWNyZXQ=, 736b2d and &#115;k."
    assert redact(text, [SECRET]) == text
    assert redact(text, [None, ""]) == text


def test_a_short_secret_is_redacted_in_plain_forms_only() -> None:
    assert redact("user pw and p%77 and cHc=", ["pw"]) == "user *** and *** and cHc="


def test_safe_url_drops_user_info_and_token_queries() -> None:
    url = "https://user:p%40ss@hub.example.com:8443/api/x?Token=abc&x=1&api_key=zz&sig=s1&X-Amz-Signature=q#access_token=t"
    assert safe_url(url) == "https://***@hub.example.com:8443/api/x?Token=***&x=1&api_key=***&sig=***&X-Amz-Signature=***#access_token=***"
    assert safe_url("https://TOKEN123456@github.com/o/r") == "https://***@github.com/o/r"
    assert safe_url("http://[::1") == "http://[::1"  # unparseable: returned as is when it holds no user info
    assert safe_url("http://u:p@[::1") == "http://***@[::1"
    assert url_secrets(url) == ["p%40ss", "abc", "zz", "s1", "q", "t"]
    assert url_secrets("https://TOKEN123456@github.com/o/r") == ["TOKEN123456"]  # the user name alone is the credential


def test_redact_message_hides_the_environment_and_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_envTokenValue123")
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror:EndpointPass99@hub.example.com")
    b64 = base64.b64encode(b"hf_envTokenValue123").decode()
    text = f"failed {b64}: see https://mirror:EndpointPass99@hub.example.com/api?token=zzz and EndpointPass99"
    assert redact_message(text) == "failed ***: see https://***@hub.example.com/api?token=*** and ***"


def test_logging_and_warnings_are_redacted_once_installed(capfd: pytest.CaptureFixture[str]) -> None:
    """huggingface_hub's retry warnings printed the request URL (with an --endpoint's credentials) six times."""
    code = (
        "import logging, warnings\n"
        "from fsb.core import secrets\n"
        "secrets.register('RegisteredSecret123')\n"
        "secrets.install_log_redaction()\n"
        "secrets.install_log_redaction()\n"
        "log = logging.getLogger('huggingface_hub.utils._http')\n"
        "log.warning('HTTP Error 500 thrown while requesting GET %s', 'http://u:EndpointPass99@127.0.0.1:9/api')\n"
        "log.warning('echo %s', 'UmVnaXN0ZXJlZFNlY3JldDEyMw==')\n"
        "try:\n    raise ValueError('RegisteredSecret123 in a traceback')\n"
        "except ValueError:\n    logging.getLogger('urllib3').exception('failed')\n"
        "warnings.warn('see http://x.example/?access_token=abcdef12345')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HF_ENDPOINT": "http://u:EndpointPass99@127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "GET http://***@127.0.0.1:9/api" in err and "echo ***" in err and "*** in a traceback" in err
    assert "access_token=***" in err
    for leak in ("EndpointPass99", "RegisteredSecret123", "UmVnaXN0ZXJlZFNlY3JldDEyMw", "abcdef12345"):
        assert leak not in err


def test_the_filter_redacts_a_record() -> None:
    secrets.register("FilterSecret4567")
    record = logging.LogRecord("httpx", logging.WARNING, __file__, 1, "key %s", ("FilterSecret4567",), None)
    assert secrets.RedactingFilter().filter(record) and record.getMessage() == "key ***"


# --- properties --------------------------------------------------------------------------------------

_SECRET_CHARS = st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="*")
_ANY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc"), exclude_characters="*" + secrets.JOINERS)
_SECRETS = st.text(_SECRET_CHARS, min_size=8, max_size=48) | st.text(_ANY_CHARS, min_size=8, max_size=24)  # keys; URL passwords
_AROUND = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=_SECRETS, before=_AROUND, after=_AROUND, name=st.sampled_from(sorted(ENCODINGS)))
def test_no_encoding_survives_and_the_text_around_is_kept(secret: str, before: str, after: str, name: str) -> None:
    """For random keys and random surrounding text: the encoded key is gone, the surrounding text intact."""
    encoded = ENCODINGS[name](secret)
    assume(redact(before, [secret]) == before and redact(after, [secret]) == after)
    out = redact(f"{before} {encoded} {after}", [secret])
    assert out == f"{before} {REDACTED} {after}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=_SECRETS,
    head=st.binary(max_size=20),
    tail=st.binary(max_size=20),
    urlsafe=st.booleans(),
    pad=st.booleans(),
    before=_AROUND,
)
def test_no_base64_blob_holding_the_secret_survives(secret: str, head: bytes, tail: bytes, urlsafe: bool, pad: bool, before: str) -> None:
    """A secret anywhere inside a base64 blob (any alignment, either alphabet, padded or not) does not decode back."""
    blob = _blob(head, secret, tail, urlsafe)
    blob = blob if pad else blob.rstrip("=")
    assume(redact(before, [secret]) == before)
    out = redact(f"{before} {blob} end", [secret])
    assert out.startswith(f"{before} ") and out.endswith(" end")
    middle = out[len(before) + 1 : -4]
    data = middle.replace(REDACTED, "")
    for start in range(4):  # nothing left decodes to the secret, whatever the alignment
        chunk = data[start:].replace("-", "+").replace("_", "/").rstrip("=")
        chunk = chunk[: len(chunk) - len(chunk) % 4]
        assert secret.encode() not in base64.b64decode(chunk + "")


@settings(max_examples=200, deadline=None)
@given(secret=_SECRETS, text=_AROUND)
def test_text_without_the_secret_is_unchanged(secret: str, text: str) -> None:
    assume(secret.lower() not in text.lower())
    assert redact(text, [secret]) == text
