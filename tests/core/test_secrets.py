"""fsb.core.secrets: the forms a key is printed in (as is, any case, URL-encoded, JSON/HTML-escaped, hex,
base64 of the key and of user:key) are redacted, everything else is kept; URLs are printed without
credentials (log records and warnings: tests/core/test_logredact.py; responses a server echoes:
tests/generate/test_generations_secrets.py)."""

from __future__ import annotations

import base64
import html
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from fsb.core import secrets
from fsb.core.secrets import REDACTED, redact, redact_message, safe_url, url_secrets

SECRET = "sk-fsb-test-7f3a9c0e-DO-NOT-LEAK"
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(secrets.__file__).parents[2])}  # the fsb under test


def _u_escapes(s: str, fmt: str = "04x") -> str:
    """Every character as JSON's \\uXXXX (a surrogate pair beyond the BMP), as JSON.stringify-style encoders write."""
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(data[i : i + 2], 'big'):{fmt}}" for i in range(0, len(data), 2))


# Each form a URL, a header, a log line or a server's JSON or HTML answer writes a key in.
ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "upper": str.upper,
    "lower": str.lower,
    "swapcase": str.swapcase,
    "percent": lambda s: quote(s, safe=""),
    "percent-every": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "json": lambda s: json.dumps(s)[1:-1],  # not .strip('"'): that cut a key's own last " off its \\"
    "json-ascii": _u_escapes,
    "json-ascii-upper": lambda s: _u_escapes(s, "04X"),
    "json-dumps-ascii": lambda s: json.dumps(s, ensure_ascii=True)[1:-1],
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "html-dec": lambda s: "".join(f"&#{ord(c)};" for c in s),
    "html-dec-nosemi": lambda s: "".join(f"&#{ord(c)}" for c in s),
    "html-hex": lambda s: "".join(f"&#x{ord(c):x};" for c in s),
    "html-HEX-padded": lambda s: "".join(f"&#X{ord(c):06X};" for c in s),
    "html-escape": html.escape,
    "html-escape-numeric": lambda s: html.escape(s).replace("-", "&#45;").replace(".", "&#x2E;"),
    "b64": lambda s: base64.b64encode(s.encode()).decode(),
    "b64-nopad": lambda s: base64.b64encode(s.encode()).decode().rstrip("="),
    "b64url": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
    "b64url-nopad": lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
    "b64-json-slash": lambda s: base64.b64encode(s.encode()).decode().replace("/", "\\/"),
    "b64-of-basic": lambda s: base64.b64encode(b"user:" + s.encode()).decode(),
    "b64url-of-basic": lambda s: base64.urlsafe_b64encode(b"me:" + s.encode()).decode().rstrip("="),
}


ADV_KEY = "sk-fsbADVERSARY123456"


def test_the_forms_no_client_writes_are_kept_as_text() -> None:
    """What is not redacted (docs/reproducibility.md, "What is redacted"): rot13, reversed, one character
    per separator, zero-width characters, fullwidth, base32, wrapped base64. The key's own forms still go."""
    b32 = base64.b32encode(ADV_KEY.encode()).decode()
    wrapped = base64.b64encode(ADV_KEY.encode()).decode()
    wrapped = wrapped[:9] + "\n" + wrapped[9:18] + "\n" + wrapped[18:]
    text = f"rot13 fx-sfoNQIREFNEL123456, reversed {ADV_KEY[::-1]}, spaced {' '.join(ADV_KEY)}, zw {chr(0x200B).join(ADV_KEY)}"
    text += f", fullwidth {''.join(chr(ord(c) + 0xFEE0) for c in ADV_KEY)}, b32 {b32}, wrapped {wrapped}"
    assert redact(text, [ADV_KEY]) == text
    assert redact(f"{text} {ADV_KEY.upper()}", [ADV_KEY]) == f"{text} {REDACTED}"
    assert redact("abc-123 reversed 321-cba, spaced a b c - 1 2 3", ["abc-123"]) == "*** reversed 321-cba, spaced a b c - 1 2 3"


@pytest.mark.parametrize(
    ("header", "printed"),
    [
        (f"Authorization: Bearer {ADV_KEY}", "Authorization: Bearer ***"),
        (f"authorization: basic {base64.b64encode(b'user:' + ADV_KEY.encode()).decode()}\r\n", "authorization: basic ***\r\n"),
        (f"Proxy-Authorization: Basic {base64.b64encode(b'x:' + ADV_KEY.encode()).decode()}", "Proxy-Authorization: Basic ***"),
        (f"X-Api-Key: {ADV_KEY.lower()}; X-Next: kept", "X-Api-Key: ***; X-Next: kept"),
        (f"Cookie: session={quote(ADV_KEY)}&theme=dark", "Cookie: session=***&theme=dark"),
    ],
)
def test_a_key_in_a_header_is_redacted(header: str, printed: str) -> None:
    """A request's headers as a client or a server's error page prints them: bearer, basic auth (base64 of
    user:key, whatever the user name's length), an API key header, a cookie."""
    assert redact(header, [ADV_KEY]) == printed


def test_an_id_prefix_before_a_base64_key_is_kept() -> None:
    """The whole base64 word goes, but not an id's prefix: a server echoing the key in a response id."""
    b64 = base64.b64encode(ADV_KEY.encode()).decode()
    assert redact(f"chatcmpl-{b64}", [ADV_KEY]) == "chatcmpl-***"
    assert redact(f"req_x-{b64}, next", [ADV_KEY]) == "req_x-***, next"
    assert redact("req-abc_def-" + b64, [ADV_KEY]) == "req-abc_def-***"  # from test_wrapped.py, which went
    assert redact("x-" * 500 + b64, [ADV_KEY]) == "x-" * 500 + REDACTED


def test_an_html_escaped_key_with_markup_characters_is_redacted() -> None:
    """html.escape writes &amp; &lt; &gt; &quot; &#x27;, markupsafe &#34; &#39;: every one is the key."""
    key = "sk-<a&b>\"q'-12345"
    for form in (html.escape(key), key.replace("&", "&amp;").replace('"', "&#34;").replace("'", "&#39;").replace("<", "&lt;")):
        assert redact(f"<p>{form}</p>", [key]) == f"<p>{REDACTED}</p>"


def test_redact_stays_about_linear_in_the_text_length() -> None:
    """A megabyte of separators, base64-looking words and fullwidth text is redacted in seconds, not minutes."""
    chunk = "s k - f s b word QURWRVJT aGVsbG8g ｓｋ－ｆ " * 100
    start = time.perf_counter()
    redact(chunk * 10, [ADV_KEY])
    small = time.perf_counter() - start
    start = time.perf_counter()
    redact(chunk * 100, [ADV_KEY])
    assert time.perf_counter() - start < max(30 * small, 3.0)


@pytest.mark.parametrize(
    ("url", "printed"),
    [
        ("http://127.0.0.1:18765/v1;token=sk-fsbURLSECRET999", "http://127.0.0.1:18765/v1;token=***"),
        ("http://h/x;access_token=SECRET/{commit}/{path}", "http://h/x;access_token=***/{commit}/{path}"),
        ("http://h/x;v=2;api_key=K/{path}", "http://h/x;v=2;api_key=***/{path}"),
        ("https://h/r/{commit}/{path}#SECRET", "https://h/r/{commit}/{path}#***"),
        ("https://h/r#", "https://h/r#***"),
        ("http://[::1:SECRET/{path}", "http://***"),
    ],
)
def test_safe_url_hides_matrix_parameters_fragments_and_broken_urls(url: str, printed: str) -> None:
    assert safe_url(url) == printed
    if "://" in url:  # a message names a URL by its scheme
        assert "SECRET" not in redact_message(f"fetch {url} failed") and redact_message(f"fetch {url} failed").endswith(" failed")


def test_url_secrets_include_matrix_parameters() -> None:
    assert url_secrets("http://h/v1;token=sk-fsbURLSECRET999/x;v=1") == ["sk-fsbURLSECRET999"]


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
    assert safe_url(url) == "https://***@hub.example.com:8443/api/x?Token=***&x=1&api_key=***&sig=***&X-Amz-Signature=***#***"
    assert safe_url("https://TOKEN123456@github.com/o/r") == "https://***@github.com/o/r"
    assert safe_url("http://[::1") == "http://***"  # unparseable: the scheme only (the rest may hold anything)
    assert safe_url("http://u:p@[::1") == "http://***"
    assert url_secrets(url) == ["p%40ss", "abc", "zz", "s1", "q", "t"]
    assert url_secrets("https://TOKEN123456@github.com/o/r") == ["TOKEN123456"]  # the user name alone is the credential


def test_redact_message_hides_the_environment_and_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_envTokenValue123")
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror:EndpointPass99@hub.example.com")
    b64 = base64.b64encode(b"hf_envTokenValue123").decode()
    text = f"failed {b64}: see https://mirror:EndpointPass99@hub.example.com/api?token=zzz and EndpointPass99"
    assert redact_message(text) == "failed ***: see https://***@hub.example.com/api?token=*** and ***"


# --- properties --------------------------------------------------------------------------------------

_SECRET_CHARS = st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="*")
_ANY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc"), exclude_characters="*")
_SECRETS = st.text(_SECRET_CHARS, min_size=8, max_size=48) | st.text(_ANY_CHARS, min_size=8, max_size=24)  # keys; URL passwords
_AROUND = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=_SECRETS, before=_AROUND, after=_AROUND, name=st.sampled_from(sorted(ENCODINGS)))
@example(secret='0000000"', before="", after="", name="json")  # the test's own encoder dropped the last "
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


def test_a_json_escaped_quote_leaves_no_escape_behind() -> None:
    """Hypothesis found it: the key's '"' was matched before its JSON escape ('\\"0000000'), leaving the
    backslash beside ***."""
    secret = '"0000000'
    assert redact(f"a {json.dumps(secret)[1:-1]} b", [secret]) == f"a {REDACTED} b"


def test_an_error_at_start_names_no_secret(tmp_path: Path) -> None:
    """The earliest error of `fsb score` (its input does not exist) goes through the lazy redaction: the
    environment's key in the path is printed as ***, in one line, exit 2."""
    env = {**CLEAN_ENV, "OPENAI_API_KEY": "StartSecret-8d1e"}
    code = "import sys; from fsb.cli import main; sys.exit(main())"
    args = ["score", str(tmp_path / "StartSecret-8d1e.csv"), "--out", str(tmp_path / "s.csv")]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "StartSecret" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("fsb score: error:") and "***.csv" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_url_a_path_collapsed_keeps_no_credentials() -> None:
    """pathlib turns "https://u:pass@host/x" into "https:/u:pass@host/x": the message printed it whole."""
    assert (
        secrets.redact_message("https:/u:hunter2pass@example.com/x.csv: file not found") == "https:/***@example.com/x.csv: file not found"
    )
    assert secrets.redact_message("ftp:/token@h/y and https://u:p@h.com/x") == "ftp:/***@h/y and https://***@h.com/x"


def test_a_traceback_fsb_prints_is_redacted_too(tmp_path: Path) -> None:
    """FSB_DEBUG=1 (and any bug) printed Python's traceback as is: the token in a label reached stderr."""
    path = tmp_path / "sec.csv"
    path.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\na,b,c,d,hf_SuperSecretTok3n9,b\n", encoding="utf-8")
    env = {**os.environ, "HF_TOKEN": "hf_SuperSecretTok3n9", "FSB_DEBUG": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "score", str(path)], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "InputError" in proc.stderr, proc.stderr
    assert "hf_SuperSecretTok3n9" not in proc.stderr and "'***' is not one of the tuple's items" in proc.stderr
