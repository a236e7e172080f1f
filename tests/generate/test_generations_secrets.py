"""Issue 20 (secrets, usage): `fsb generate` against a hostile server on 127.0.0.1 (tests/_echo_server.py)
that echoes the key back base64-encoded (alone or inside a longer blob), as HTML entities, as hex or
JSON-escaped: nothing that undoes to the key reaches the stored response (the output, the journal, the
failures file, the CSV) or the terminal. (Its zero-width and double-percent forms are no longer
redacted: docs/reproducibility.md, "What is redacted".) Absurd usage counts are not summed.
`--base-url` credentials are never echoed in an error. Each test failed on main before issue 20's fix.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests._echo_server import ENCODINGS, EchoServer
from tests._support import run_fsb
from tests.generate.test_generate import SECRET, fsb, read_jsonl, write_seed_file

_B64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX = re.compile(r"[0-9a-fA-F]{16,}")
_ZW = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))


def undone(text: str) -> list[str]:
    """`text` and what each client-side decoding makes of it: HTML, percent (twice), JSON escapes, zero-width
    characters dropped, every base64 run (at each alignment, either alphabet) and every hex run decoded."""
    out = [text, html.unescape(text), unquote(unquote(text)), text.translate(_ZW)]
    out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text))
    for run in _B64.findall(text):
        for start in range(4):
            chunk = run[start:].translate(str.maketrans("-_", "+/")).rstrip("=")
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            out.append(base64.b64decode(chunk).decode("latin-1"))
    for run in _HEX.findall(text):
        out.append(binascii.unhexlify(run[: len(run) // 2 * 2]).decode("latin-1"))
    return out


def assert_nowhere(secret: str, *texts: str) -> None:
    for text in texts:
        for form in undone(text):
            assert secret.lower() not in form.lower(), text[:2000]


def everything(folder: Path, *procs: object) -> str:
    text = "".join(getattr(p, "stdout", "") + getattr(p, "stderr", "") for p in procs)
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            text += f.read_text(encoding="utf-8", errors="replace")
    return text


def _generate(
    server: EchoServer, seeds: Path, out: Path, model: str, *extra: str | Path, key: str | None = SECRET, in_process: bool = True
) -> object:
    base = f"{server.url}/v1"
    args = ("generate", "--seeds", seeds, "--out", out, "--model", model, "--base-url", base, "--formats", "conversion", "--no-progress")
    if in_process:
        return fsb(*args, *extra, key=key)
    # a real process: a library warning reaches stderr through logging's last resort (in process, pytest's
    # log capture would take it)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update({"OPENAI_API_KEY": key} if key is not None else {})
    return run_fsb(*map(str, (*args, *extra)), env=env, in_process=False)


DROPPED = {"zw", "pct2"}  # the echo server's forms no client writes a key in


@pytest.mark.parametrize("encoding", sorted(set(ENCODINGS) - DROPPED))
def test_a_key_echoed_in_any_encoding_is_written_nowhere(encoding: str, tmp_path: Path) -> None:
    """Main stored `Your key: c2stZnNi...` (base64) and `&#115;&#107;...` in OUT, journal and CSV."""
    work = tmp_path / "run"
    work.mkdir()
    seeds = write_seed_file(work / "seeds.jsonl", per_type=1)
    out, csv_path = work / "gens.jsonl", work / "gens.csv"
    with EchoServer() as server:
        proc = _generate(server, seeds, out, f"echo:{encoding}", "--csv", csv_path)
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out)
    assert len(rows) == 4
    for row in rows:
        assert row["raw_response"].startswith("Your key: ") and row["raw_response"].endswith(" (keep it)")
        assert "***" in row["raw_response"] and row["response_id"] == "chatcmpl-***"
    assert csv_path.read_text(encoding="utf-8").count("***") == 4
    assert_nowhere(SECRET, everything(work, proc))


def test_a_key_in_a_server_error_is_written_and_printed_nowhere(tmp_path: Path) -> None:
    """A 400 quoting the key base64-encoded: the failure reason goes to the journal, the failures file and stderr."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with EchoServer() as server:
        proc = _generate(server, seeds, out, "status:400", "--retries", "0")
    assert proc.returncode == 1
    failures = read_jsonl(tmp_path / "gens.failures.jsonl")
    assert len(failures) == 4 and all(f["reason"] == "HTTP 400: invalid key ***" for f in failures)
    assert_nowhere(SECRET, everything(tmp_path, proc))


def test_absurd_usage_counts_are_not_summed(tmp_path: Path) -> None:
    """Main printed `4000000000000000079538499354624 prompt + -20 completion tokens` and stored the counts."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with EchoServer() as server:
        absurd = _generate(server, seeds, out, "usage:absurd", in_process=False)
        sane = _generate(server, seeds, tmp_path / "sane.jsonl", "plain", in_process=False)
    assert absurd.returncode == 0, absurd.stderr
    assert "0 prompt + 0 completion tokens" in absurd.stderr
    warnings = [line for line in absurd.stderr.splitlines() if "absurd token usage" in line]
    assert len(warnings) == 1 and "prompt_tokens=1e+30" in warnings[0] and "completion_tokens=-5" in warnings[0]
    rows = read_jsonl(out)
    assert all(r["usage"] is None and "prompt_tokens=1e+30" in r["usage_rejected"] for r in rows)
    assert sane.returncode == 0 and "28 prompt + 12 completion tokens" in sane.stderr  # 4 x (7 + 3): counted as before
    assert all(r["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10} for r in read_jsonl(tmp_path / "sane.jsonl"))
    assert "usage_rejected" not in json.dumps(read_jsonl(tmp_path / "sane.jsonl"))


@pytest.mark.parametrize(
    "url",
    [
        "ftp://me:UrlSecret0987654@api.example.com/v1",
        "http://me:UrlSecret0987654@api.example.com:99999/v1",  # main: a ValueError traceback
        "gopher://api.example.com/v1?api_key=UrlSecret0987654",
        "https://UrlSecret0987654@[::1/v1",
    ],
)
def test_base_url_credentials_are_never_echoed(url: str, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    proc = fsb("generate", "--seeds", seeds, "--out", tmp_path / "g.jsonl", "--model", "m", "--base-url", url, key=SECRET)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("fsb generate: error: --base-url")
    assert_nowhere("UrlSecret0987654", proc.stdout + proc.stderr)
    assert_nowhere(SECRET, proc.stdout + proc.stderr)


def test_the_journal_scrub_reaches_keys_values_and_nested_items() -> None:
    from fsb.engine import resolve_endpoint
    from fsb.engine.journal import scrub

    endpoint = resolve_endpoint("http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": SECRET})
    b64 = base64.b64encode(SECRET.encode()).decode()
    event = {"row": {f"k-{SECRET}": [("x", b64)], "n": 3, "hex": SECRET.encode().hex(), "none": None}}
    assert scrub(event, endpoint.redact) == {"row": {"k-***": [["x", "***"]], "n": 3, "hex": "***", "none": None}}


@pytest.mark.parametrize(
    ("usage", "kept"),
    [
        ({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}, True),
        ({"prompt_tokens": 7.0, "completion_tokens": None}, True),
        ({"prompt_tokens": 10_000_001}, False),
        ({"prompt_tokens": 1e30}, False),
        ({"completion_tokens": -1}, False),
        ({"completion_tokens": True}, False),
        ({"completion_tokens": "12"}, False),
        ({"completion_tokens": float("nan")}, False),
        ([7, 3], False),
    ],
)
def test_check_usage_keeps_only_believable_counts(usage: object, kept: bool) -> None:
    from fsb.engine.responses import check_usage

    got, why = check_usage(usage)
    assert (got is not None) == kept and (why is None) == kept
    if kept:
        assert got is not None and all(v is None or type(v) is int for v in got.values())


def test_a_token_in_a_base_url_matrix_parameter_is_written_nowhere(tmp_path: Path) -> None:
    """`--base-url http://127.0.0.1:PORT/v1;token=sk-...` was stored in the clear as `base_url` in outputs and journal."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with EchoServer() as server:
        url = f"{server.url}/v1;token=sk-fsbURLSECRET999"
        proc = fsb(
            "generate",
            "--seeds",
            seeds,
            "--out",
            out,
            "--model",
            "plain",
            "--base-url",
            url,
            "--formats",
            "conversion",
            "--no-progress",
            key=SECRET,
        )
    assert proc.returncode == 0, proc.stderr
    assert all(row["base_url"].endswith("/v1;token=***") for row in read_jsonl(out))
    assert_nowhere("sk-fsbURLSECRET999", everything(tmp_path, proc))
