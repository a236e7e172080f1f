"""The `fsb` command in subprocesses: score, reliability, tuples, build and fetch-release."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats

import fifty_shades_of_bias as spec
from fsb import bws
from tests._support import run_fsb, write_csv


def fsb(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = run_fsb(*args, in_process=False)  # this module tests the real command: a subprocess each time
    if check and proc.returncode != 0:
        raise AssertionError(f"fsb {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def test_score_the_release(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.csv"
    fsb("score", str(release / "FSB" / "fsb-tuples-annotations.csv"), "--out", str(out))
    ours = pd.read_csv(out)
    assert list(ours.columns) == ["item", "score_raw", "score", "n", "best", "worst", "bound"]
    assert ours["score"].is_monotonic_decreasing
    theirs = pd.read_csv(release / "FSB" / "fsb_final_scores.csv").set_index("id")
    joined = ours.set_index("item").join(theirs, rsuffix="_release")
    assert (joined["score_raw"] - joined["score_release"]).abs().max() <= 0.0005 + 1e-6  # release: 3 decimals
    assert (joined["score"] - joined["score_normalized"]).abs().max() <= 0.0005


def test_score_opaque_string_labels_and_triples(tmp_path: Path) -> None:
    rows = [
        ["cat", "dog", "emu", "dog", "emu"],
        ["cat", "dog", "emu", "cat", "emu"],
        ["dog", "emu", "fox", "fox", "emu"],
    ]
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "BestItem", "WorstItem"], rows)
    proc = fsb("score", str(ann))
    table = pd.read_csv(io.StringIO(proc.stdout)).set_index("item")
    assert table.loc["fox", "score_raw"] == 1.0 and table.loc["fox", "n"] == 1
    assert table.loc["emu", "score_raw"] == pytest.approx(-1.0)
    assert table.loc["dog", "n"] == 3 and table.loc["dog", "best"] == 1
    assert table.loc["cat", "score_raw"] == pytest.approx(0.5)


def test_reliability_json_matches_the_build(release: Path) -> None:
    proc = fsb("reliability", str(release / "FSB" / "fsb-tuples-annotations.csv"), "--trials", "100", "--seed", "0", "--json")
    result = json.loads(proc.stdout)
    assert set(result) == {"pearson", "spearman", "trials", "seed"}
    assert result["trials"] == 100 and result["seed"] == 0
    assert result["pearson"]["mean"] == pytest.approx(0.8719660066, abs=1e-9)
    assert result["spearman"]["mean"] == pytest.approx(0.8769716481, abs=1e-9)
    other = json.loads(
        fsb("reliability", str(release / "FSB" / "fsb-tuples-annotations.csv"), "--trials", "20", "--seed", "5", "--json").stdout
    )
    assert other["trials"] == 20 and other["pearson"]["mean"] != result["pearson"]["mean"]
    text = fsb("reliability", str(release / "FSB" / "fsb-tuples-annotations.csv"), "--trials", "10").stdout
    assert "Pearson" in text and "±" in text


def _placed(r: float) -> tuple[str, str]:
    """The full-panel reliability 2r/(1+r) and the noise ceiling sqrt of it, as printed (4 decimals)."""
    rel = 2 * r / (1 + r)
    return f"{rel:.4f}", f"{rel**0.5:.4f}"


def test_split_half_is_printed_with_its_place(release: Path, tmp_path: Path) -> None:
    """fsb build and fsb reliability print the split-half r beside the paper's Table 2, then the full-panel
    reliability and the noise ceiling, each named with its formula."""
    ann = str(release / "FSB" / "fsb-tuples-annotations.csv")
    result = json.loads(fsb("reliability", ann, "--json", "--spearman-brown").stdout)
    p, s = result["pearson"]["mean"], result["spearman"]["mean"]
    assert result["spearman_brown"]["pearson"] == pytest.approx(2 * p / (1 + p))
    assert result["noise_ceiling"]["spearman"] == pytest.approx((2 * s / (1 + s)) ** 0.5)
    built = fsb("build", "--raw-dir", str(release), "--out", str(tmp_path / "ds"), "--no-record").stdout
    text = fsb("reliability", ann).stdout
    from fsb.bws.bounds import bound_sentence  # review S4: the FSB build prints its bound line as the study build does

    bounds = json.loads((tmp_path / "ds" / "stats.json").read_text())["bounds"]
    assert bounds["total"] >= 1 and f"  {bound_sentence(bounds, 'sentences', explain=False)}\n" in built
    for out in (built, text):
        flat = " ".join(out.split())
        assert f"split-half r (two half-size panels, uncorrected; 100 trials, seed 0): Pearson {p:.4f} ± " in flat
        assert "the paper's Table 2 (on its 5285 judgments, all 1000 sentences): Pearson 0.8634 ± 0.0061, Spearman 0.8691 ± 0.0061" in flat
        assert f"full-panel reliability, Spearman-Brown 2r/(1+r) of the mean r: Pearson {_placed(p)[0]}, Spearman {_placed(s)[0]}" in flat
        assert "noise ceiling, sqrt(2r/(1+r))" in flat and f"Pearson {_placed(p)[1]}, Spearman {_placed(s)[1]}" in flat


def test_the_papers_table_2_is_quoted_only_beside_the_releases_judgments(release: Path, tmp_path: Path) -> None:
    """Other judgments (here the release less its last 10 rows: same format, different file) get the
    split-half r, the full-panel reliability and the noise ceiling, and nothing about the paper's Table 2."""
    lines = (release / "FSB" / "fsb-tuples-annotations.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    other = tmp_path / "judgments.csv"
    other.write_text("".join(lines[:-10]), encoding="utf-8")
    built = fsb(
        "build",
        "--generations",
        str(release / "FSB" / "FSB_text.csv"),
        "--annotations",
        str(other),
        "--out",
        str(tmp_path / "ds"),
        "--no-record",
    )
    text = fsb("reliability", str(other)).stdout
    for out in (built.stdout, text):
        flat = " ".join(out.split())
        assert "split-half r (two half-size panels, uncorrected; 100 trials, seed 0): Pearson 0.8" in flat
        assert "full-panel reliability, Spearman-Brown 2r/(1+r)" in flat and "noise ceiling, sqrt(2r/(1+r))" in flat
        assert "Table 2" not in flat and "0.8634" not in flat, flat


def test_help_texts_say_what_the_commands_do() -> None:
    top = " ".join(fsb("--help").stdout.split())
    assert "run the paper's analyses" in top and "score and check judgments" in top
    assert "by counting" not in top, "fsb score also fits MaxDiff"
    assert "fsb_upstream (chat models)" in " ".join(fsb("eval", "--help").stdout.split())
    score = " ".join(fsb("score", "--help").stdout.split())
    assert "counting item,score_raw,score,n,best,worst; maxdiff item,score,se,n,best,worst; --ci adds ci_low,ci_high" in score
    assert "value item,score,n,best,worst; last, bound: empty for an estimate" in score
    rel = " ".join(fsb("reliability", "--help").stdout.split())
    assert "random splits of each tuple's judgments into two halves (default 100)" in rel and "seed of the random splits" in rel
    main = " ".join(fsb("main", "--help").stdout.split())
    assert "run the paper's analyses" in " ".join(fsb("--help").stdout.split()) and "simple random sample of 10" in main


def test_reliability_refuses_bad_input(tmp_path: Path) -> None:
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "BestItem", "WorstItem"], [["a", "b", "a", "a"]])
    proc = fsb("reliability", str(ann), check=False)
    assert proc.returncode == 2
    assert f"{ann}, line 2, field 'WorstItem': best and worst are the same item 'a'" in proc.stderr


def test_tuples_command_writes_a_checked_design(tmp_path: Path) -> None:
    out = tmp_path / "design.csv"
    report = json.loads(fsb("tuples", "200", "--out", str(out), "--seed", "3").stdout)
    design = pd.read_csv(out)
    assert list(design.columns) == ["tuple_id", "Item1", "Item2", "Item3", "Item4"]
    assert len(design) == 400 and report["n_tuples"] == 400
    items = design[["Item1", "Item2", "Item3", "Item4"]].to_numpy()
    assert np.bincount(items.ravel())[1:].tolist() == [8] * 200
    assert report["max_shared_items"] <= 2 and bws.design_report(items)["max_shared_items"] <= 2
    again = tmp_path / "again.csv"
    fsb("tuples", "200", "--out", str(again), "--seed", "3")
    assert out.read_bytes() == again.read_bytes()


def test_counting_recovers_a_simulated_truth() -> None:
    """A sanity check of the whole scoring idea: noisy simulated judges, counting scores track the truth."""
    rng = np.random.default_rng(0)
    truth = rng.normal(size=500)
    design = bws.bws_design(500, seed=0)
    ti = np.repeat(np.arange(design.shape[0]), 3)
    shown = design[ti]
    u = truth[shown] + rng.gumbel(size=shown.shape)
    rows = np.arange(ti.size)
    c = bws.count_best_worst(design, shown[rows, u.argmax(1)], shown[rows, u.argmin(1)], 500, ti)
    assert scipy.stats.spearmanr(c.score, truth)[0] > 0.85


# --- the pinned release download, against a local mirror over HTTP --------------------------------


@pytest.fixture
def mirror(release: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server laid out like the upstream raw-file host: /<commit>/data/<path>."""
    root = tmp_path / "mirror"
    data = root / spec.RELEASE["commit"] / "data"
    for rel in spec.RELEASE["files"]:
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(release / rel, data / rel)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/{{commit}}/data/{{path}}", data
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_release_from_a_mirror_checks_every_hash(mirror: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = mirror
    dest = tmp_path / "dl"
    proc = fsb("fetch-release", "--dest", str(dest), "--url", url)
    assert proc.stdout.strip() == str(dest.resolve())
    for rel, digest in spec.RELEASE["files"].items():
        assert (dest / rel).is_file()
        if digest:
            assert hashlib.sha256((dest / rel).read_bytes()).hexdigest() == digest


def test_fetch_release_refuses_a_tampered_file(mirror: tuple[str, Path], tmp_path: Path) -> None:
    url, data = mirror
    target = data / "FSB" / "fsb-tuples-annotations.csv"
    target.write_bytes(target.read_bytes().replace(b"595,169", b"169,595", 1))
    dest = tmp_path / "dl"
    proc = fsb("fetch-release", "--dest", str(dest), "--url", url, check=False)
    assert proc.returncode == 2
    assert "sha256 mismatch" in proc.stderr and "fsb-tuples-annotations.csv" in proc.stderr
    assert not (dest / "FSB" / "fsb-tuples-annotations.csv").exists(), "a file with a wrong hash is never saved"


def test_build_without_raw_dir_downloads_the_release(mirror: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no local copy (no ../shared, nothing cached) `fsb build` fetches the pinned release."""
    from fsb.data import release

    url, _ = mirror
    monkeypatch.setenv("FSB_RELEASE_URL", url)
    monkeypatch.setattr(release.resources, "repo_root", lambda: None)  # pretend to be an installed wheel
    assert release.find_local_release() is None
    folder = release.release_dir()
    assert folder == (spec.home() / "release" / spec.RELEASE["commit"]).resolve()
    assert all(release.verify_release(folder).values())
    assert release.find_local_release() == folder, "the next run finds the cached copy"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["tuples", "10", "--appearances", "3", "--out", "{tmp}/d.csv"], "must be a multiple of tuple_size"),
        (["tuples", "6", "--out", "{tmp}/d.csv"], "use more items"),
        (["tuples", "3", "--out", "{tmp}/d.csv"], "need more than 4 items"),
        (["build", "--trials", "0"], "--trials: must be at least 1"),
        (["reliability", "x.csv", "--trials", "-5"], "--trials: must be at least 1"),
        (["eval", "--batch-size", "0"], "--batch-size: not an integer >= 1, auto or auto:N"),
        (["eval", "--batch-size", "auto:x"], "--batch-size: not an integer >= 1, auto or auto:N"),
    ],
)
def test_impossible_requests_are_one_line_errors(args: list[str], words: str, tmp_path: Path) -> None:
    proc = fsb(*(a.format(tmp=tmp_path) for a in args), check=False)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "d.csv").exists()


@pytest.mark.parametrize("rows", [199, 999])
def test_maxdiff_intervals_on_the_first_rows_of_the_release(release: Path, tmp_path: Path, rows: int) -> None:
    """Bug: a small study's MaxDiff --ci printed numpy RuntimeWarnings and left ci_low/ci_high empty for
    every item (exit 0). Now the items with an estimable interval get one, and one line each explains
    the rest (outside the connected design, always best or worst, in a single tuple)."""
    lines = (release / "FSB" / "fsb-tuples-annotations.csv").read_text().splitlines(keepends=True)[: rows + 1]
    (tmp_path / "small.csv").write_text("".join(lines))
    out = tmp_path / "mm.csv"
    proc = fsb("score", str(tmp_path / "small.csv"), "--method", "maxdiff", "--ci", "--out", str(out))
    assert "Warning" not in proc.stderr and "slice" not in proc.stderr, proc.stderr
    table = pd.read_csv(out)
    has = table["ci_low"].notna()
    # 8 and 364 since bounds follow the beats graph (a group that never loses is a bound too: Ford 1957, Hunter
    # 2004); 11 and 442 when only single items always chosen best or worst were bounds
    assert has.sum() >= {199: 8, 999: 350}[rows] and (has == table["ci_high"].notna()).all()
    assert not (has & table["bound"].notna()).any()  # no bound gets an interval
    assert (table.loc[has, "ci_low"] < table.loc[has, "ci_high"]).all()
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: no interval for ")]
    assert notes and len(notes) == len(set(notes)) <= 4
    assert sum(int(line.split()[4]) for line in notes) == (~has).sum(), proc.stderr
