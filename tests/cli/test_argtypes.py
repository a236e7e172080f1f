"""The shared argparse converters: a bad value is argparse's one-line usage error naming the option."""

from __future__ import annotations

import argparse

import pytest

from fsb.cli.app import main
from fsb.cli.argtypes import pos_float


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e400", "0", "-1", "x"])
def test_pos_float_refuses_what_is_not_a_finite_positive_number(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        pos_float(text)


def test_pos_float_takes_a_positive_number() -> None:
    assert pos_float("2.5") == 2.5 and pos_float("1e-3") == 0.001


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-2"])
def test_analyse_prior_scale_is_refused_in_one_line(value: str, tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["analyse", "somewhere", f"--prior-scale={value}", "--out", "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fsb analyse: error: argument --prior-scale: must be greater than 0 and finite")
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--backoff", "inf"),
        ("--backoff", "1e9"),
        ("--timeout", "inf"),
        ("--retries", "99999999999"),
        ("--max-tokens", "99999999999999"),
        ("--api-seed", "99999999999999999999999999"),
        ("--shots", "999999"),
    ],
)
def test_absurd_request_options_are_refused_in_one_line(option: str, value: str) -> None:
    """The adversarial pass: `fsb generate --backoff inf` against a closed port hung until killed, and absurd
    --timeout/--retries/--max-tokens/--api-seed/--shots were accepted with exit 0 (and sent on to servers)."""
    from tests._support import run_fsb

    proc = run_fsb("generate", "--seeds", "implicit=seeds.txt", "--out", "o.jsonl", "--model", "m", option, value)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and option in proc.stderr and "must be from" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["score", "j.csv", "--out", ""],
        ["score", ""],
        ["reliability", ""],
        ["tuples", "8", "--out", ""],
        ["annotate", "import", "r.csv", "--tuples", "", "--out", "j.csv"],
        ["annotate", "export", "d.csv", "--items", "g.csv", "--out", ""],
        ["build", "--out", ""],
        ["seeds", "--out", ""],
        ["baseline", "lexicon", "--out", ""],
        ["analyse", "ds", "--out", ""],
    ],
)
def test_an_empty_path_option_is_called_empty(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34, fault 5: `--out ''` was reported as ".: is a folder"; every path option says it is empty."""
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ": is empty: give a path" in err[0] and "argument " in err[0], err
