"""The best-worst tasks (fsb_bws, fsb_bws_ll) and `fsb annotate llm`: the annotators' test for models.

Models whose answers are known (an oracle that picks the human majority, a model that always picks
position 1) run through lm-eval's Python API on the real release; the tiny model runs through the
lm-eval CLI (hf backend) and, as a chat server, through `fsb annotate llm`. Every metric is recomputed
here from the logged samples or the raw annotations, by counting written out in the test. These are
tests of the harness/ task folder (not a package module); the protocol's parser and rotations
(fsb.annotate.bwsprompt) have their own tests in tests/annotate/test_bwsprompt.py.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

import fifty_shades_of_bias as spec
from fsb.annotate import bwsprompt
from fsb.evaluate.results import dataset_table, load_run
from fsb.evaluate.runner import run_eval

BIN = Path(sys.executable).parent
LINE = re.compile(r"^([1-4])\. (.*)$", re.M)


# --- models whose choices are known -----------------------------------------------------------------


def _human(dataset: Path) -> tuple[dict[frozenset[int], dict[str, Any]], dict[int, float], dict[str, int]]:
    """From the parquet files, independently of the harness: per tuple (item set) its best and worst
    counts; the human scores; text -> id."""
    ann = spec.load("annotations", source=str(dataset))[spec.SPLIT].to_pandas()
    rows = spec.load(source=str(dataset))[spec.SPLIT]
    tuples: dict[frozenset[int], dict[str, Any]] = {}
    for items, b, w in zip(ann["items"], ann["best"], ann["worst"]):
        t = tuples.setdefault(frozenset(int(i) for i in items), {"best": {}, "worst": {}})
        t["best"][int(b)] = t["best"].get(int(b), 0) + 1
        t["worst"][int(w)] = t["worst"].get(int(w), 0) + 1
    texts = dict(zip(rows["text"], rows["id"]))
    assert len(texts) == rows.num_rows, "sentences are told apart by their text"
    return tuples, dict(zip(rows["id"], rows["score"])), texts


def _oracle_pick(t: dict[str, Any]) -> tuple[int, int]:
    """The human majority's best and worst (ties: the smallest ids with best != worst)."""
    top_b, top_w = max(t["best"].values()), max(t["worst"].values())
    modal_b = sorted(i for i, c in t["best"].items() if c == top_b)
    modal_w = sorted(i for i, c in t["worst"].items() if c == top_w)
    return next((b, w) for b in modal_b for w in modal_w if b != w)


class _Known(LM):
    """A model whose choice of each presentation is a function of the four sentences shown."""

    def __init__(self, choose: Any) -> None:
        super().__init__()
        self.choose = choose

    def _pick(self, prompt: str) -> tuple[int, int]:
        return self.choose([t for _, t in LINE.findall(prompt)])

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return ["Most: {}\nLeast: {}".format(*self._pick(r.args[0])) for r in requests]

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        out = []
        for r in requests:
            ctx, cont = r.args
            most, least = self._pick(ctx)
            want = most if ctx.endswith("Most:") else least
            out.append((0.0 if cont == f" {want}" else -5.0, cont == f" {want}"))
        return out

    def loglikelihood_rolling(self, requests: list[Instance]) -> list[float]:
        raise NotImplementedError


def _samples(out: Path, task: str) -> list[dict[str, Any]]:
    (path,) = [p for p in out.rglob(f"samples_{task}_*.jsonl") if re.fullmatch(rf"samples_{task}_\d{{4}}-.*", p.name)]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _arguments(sample: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The logged requests of one document, in order: (prompt, continuation or generation settings)."""
    return [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]


def _recount(samples: list[dict[str, Any]], gold: dict[int, float]) -> tuple[float, float, float]:
    """Pearson of counting scores (from the logged choices) with the human scores, best and worst agreement."""
    n: dict[int, int] = {}
    score: dict[int, int] = {}
    hits = {"best": [], "worst": []}
    for s in samples:
        rec = s["pearson"]
        for p in rec["shown"]:
            if p["best"] is None:
                continue
            shown = [rec["items"][(k + p["shift"]) % 4] for k in range(4)]
            assert shown[p["best"] - 1] == p["best_item"] and shown[p["worst"] - 1] == p["worst_item"]
            for i in rec["items"]:
                n[i] = n.get(i, 0) + 1
            score[p["best_item"]] = score.get(p["best_item"], 0) + 1
            score[p["worst_item"]] = score.get(p["worst_item"], 0) - 1
            hits["best"].append(p["best_item"] in rec["majority_best"])
            hits["worst"].append(p["worst_item"] in rec["majority_worst"])
    ids = sorted(n)
    model = np.array([(score.get(i, 0) / n[i] + 1) / 2 for i in ids])
    r = float(np.corrcoef(model, [gold[i] for i in ids])[0, 1])
    return r, float(np.mean(hits["best"])), float(np.mean(hits["worst"]))


def test_oracle_agrees_fully_and_correlates_as_majority_vote_counting(release_dataset: Path, tmp_path: Path) -> None:
    tuples, gold, ids = _human(release_dataset)
    assert len(tuples) == 2000

    def oracle(texts: list[str]) -> tuple[int, int]:
        shown = [ids[t] for t in texts]
        b, w = _oracle_pick(tuples[frozenset(shown)])
        return shown.index(b) + 1, shown.index(w) + 1

    results = run_eval(_Known(oracle), tasks=["fsb_bws"], output_path=tmp_path / "out", dataset=str(release_dataset), echo=None)
    got = results["results"]["fsb_bws"]
    # expected, from the raw annotations: every tuple counted once with its majority's best and worst
    n, net = {}, {}
    for items, t in tuples.items():
        b, w = _oracle_pick(t)
        for i in items:
            n[i] = n.get(i, 0) + 1
        net[b] = net.get(b, 0) + 1
        net[w] = net.get(w, 0) - 1
    order = sorted(n)
    majority_scores = np.array([(net.get(i, 0) / n[i] + 1) / 2 for i in order])
    expected = float(np.corrcoef(majority_scores, [gold[i] for i in order])[0, 1])
    assert got["best_agreement,none"] == 1.0 and got["worst_agreement,none"] == 1.0 and got["parse_rate,none"] == 1.0
    assert got["pearson,none"] == pytest.approx(expected, abs=1e-12)
    assert 0.8 < expected < 0.99, "majority-vote counting tracks, but is not, the full counts"
    samples = _samples(tmp_path / "out", "fsb_bws")
    assert len(samples) == 2000 and all(len(s["arguments"]) == 2 for s in samples), "one answer per rotation (0 and 2)"
    r, best, worst = _recount(samples, gold)
    assert (r, best, worst) == (pytest.approx(got["pearson,none"], abs=1e-12), 1.0, 1.0)
    for s in samples[:20]:  # the prompts show the tuple in rotations 0 and 2
        texts = [LINE.findall(a[0]) for a in _arguments(s)]
        assert [t for _, t in texts[0]] == s["doc"]["texts"]
        assert [t for _, t in texts[1]] == bwsprompt.rotate(s["doc"]["texts"], 2)


def test_a_position_one_model_is_exposed_by_the_position_report(release_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "pos1"
    run_eval(_Known(lambda texts: (1, 4)), tasks=["fsb_bws_ll"], output_path=out, sample=60, dataset=str(release_dataset), echo=None)
    samples = _samples(out, "fsb_bws_ll")
    assert len(samples) == 60
    for s in samples:
        args = _arguments(s)
        assert len(args) == 16, "2 rotations x (4 labels after Most: + 4 after Least:)"
        contexts = {a[0] for a in args}
        assert len(contexts) == 4 and sum(a[0].endswith("Most:") for a in args) == 8, "2 prompts per rotation"
        assert [a[1] for a in args[:8]] == [" 1", " 2", " 3", " 4"] * 2
    res = load_run(out).results["results"]["fsb_bws_ll"]
    assert res["best_position_1,none"] == 1.0 and res["worst_position_4,none"] == 1.0
    assert res["best_position_2,none"] == res["best_position_3,none"] == res["best_position_4,none"] == 0.0
    _, gold, _ = _human(release_dataset)
    r, best, worst = _recount(samples, gold)
    assert res["pearson,none"] == pytest.approx(r, abs=1e-12)
    assert (res["best_agreement,none"], res["worst_agreement,none"]) == (pytest.approx(best), pytest.approx(worst))
    proc = subprocess.run(
        [str(BIN / "fsb"), "report", str(out), "--dataset", str(release_dataset), "--bootstrap", "200", "--trials", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "## Best-worst protocol" in text
    row = next(line for line in text.splitlines() if "fsb_bws_ll | as best |" in line)
    assert "| 1.000 [1.000, 1.000] | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] | 0.25 |" in row
    assert "best-worst: 60 tuples (simple random sample of 60 of 2000 tuples (seed 0)), rotations 0,2" in text


def _as_hf_run(folder: Path, model_args: str) -> None:
    """Record the run's model as lm-eval's CLI does for `--model hf --model_args ...`."""
    (path,) = folder.rglob("results_*.json")
    results = json.loads(path.read_text())
    results["config"].update(model="hf", model_args=model_args)
    path.write_text(json.dumps(results))


def test_a_best_worst_sample_is_flagged_like_a_rating_sample(release_dataset: Path, tmp_path: Path) -> None:
    """fsb main --per-bin 1 and lm_eval --limit 2 on fsb_bws_ll: flagged as samples by tuples and sentences
    covered (never "all 2000 judged tuples"), no mse, and the model labelled by its name."""
    from fsb.evaluate import report as compare

    args = "pretrained=/tmp/somewhere/Tiny-LM,dtype=float32"
    for name, kw in (("perbin", {"per_bin": 1}), ("limit", {"limit": 2})):
        run_eval(
            _Known(lambda texts: (1, 4)), tasks=["fsb_bws_ll"], output_path=tmp_path / name, dataset=str(release_dataset), echo=None, **kw
        )
        _as_hf_run(tmp_path / name, args)
    rating = tmp_path / "rating"
    rating.mkdir()
    table = dataset_table(str(release_dataset))
    ids, golds = table.ids[table.scored][:12], table.scores[table.scored][:12]
    results = {"results": {"fsb_0shot": {}}, "configs": {"fsb_0shot": {}}, "config": {"model": "hf", "model_args": args}}
    (rating / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))
    (rating / "samples_fsb_0shot_2026-01-01T00-00-00.jsonl").write_text(
        "".join(json.dumps({"doc": {"id": int(i)}, "pearson": [float(g) / 2, float(g)]}) + "\n" for i, g in zip(ids, golds))
    )
    report, _ = compare.build(
        [tmp_path / "perbin", tmp_path / "limit", rating], dataset=str(release_dataset), n_boot=50, reference_trials=2
    )
    rows = {r["label"]: r for r in report["rows"]}
    perbin, limited = rows["Tiny-LM fsb_bws_ll #1"], rows["Tiny-LM fsb_bws_ll #2"]
    covered = {n: len({i for rec in load_run(tmp_path / n).bws["fsb_bws_ll"] for i in rec["items"]}) for n in ("perbin", "limit")}
    assert perbin["sentences"] == covered["perbin"] and limited["sentences"] == covered["limit"]
    assert perbin["flags"][0] == (
        f"sample: 4 of 2000 judged tuples covering {covered['perbin']} of 1000 sentences, not comparable with the 960-sentence figures"
    )
    assert perbin["flags"][1].startswith("best-worst: 4 tuples (stratified: ") and perbin["flags"][1].endswith("rotations 0,2")
    assert limited["flags"] == [
        "--limit 2",
        f"sample: 2 of 2000 judged tuples covering {covered['limit']} of 1000 sentences, not comparable with the 960-sentence figures",
        "best-worst: 2 tuples (the first 2 of all 2000 judged tuples, by --limit), rotations 0,2",
    ]
    for r in (perbin, limited):
        assert math.isnan(r["values"]["mse"]) and "not given (best-worst)" in r["mse_note"]
        assert all(math.isnan(b["mse"]) for groups in r["breakdowns"].values() for b in groups.values())
    text = compare.render_markdown(report)
    main = [
        line
        for line in text.splitlines()
        if line.startswith("| ") and "Tiny-LM fsb_bws_ll" in line and line.split("|")[1].strip().isdigit()
    ][:2]
    assert all("| not given (best-worst) |" in line and line.split("|")[8].split()[0] in ("S", "B") for line in main)
    assert "no mse: not given (best-worst): the counting scores share the human scores' [0, 1] scale" in text
    pairs = text.split("### Rating vs best-worst, per model")[1].split("\n\n")[1]
    assert "hf pretrained=" not in pairs and all(line.startswith("| Tiny-LM |") for line in pairs.splitlines()[2:])
    items = compare.forest_items(report)
    assert all("(sample of " in t["label"] for t in items if "fsb_bws_ll" in t["label"])
    legend = [text for _, text in compare.forest_legend(items)]
    assert legend[:2] == ["lm-eval run", "paper Table 6 (quoted; no interval)"], "no prediction-file or baseline entry: none drawn"


# --- the tiny model through the lm-eval CLI and transformers serve --------------------------------


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, check=False, timeout=1200)


@pytest.mark.slow
def test_lm_eval_cli_hf_both_tasks(release_dataset: Path, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu"]
    cmd += ["--tasks", "fsb_bws,fsb_bws_ll", "--metadata", json.dumps({"fsb_sample": 4, "fsb_bws_rotations": "0,1,2"})]
    proc = _run([*cmd, "--log_samples", "--output_path", str(out)], tmp_path, FSB_DATASET=str(release_dataset))
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = load_run(out).results["results"]
    _, gold, _ = _human(release_dataset)
    for task, per in (("fsb_bws", 1), ("fsb_bws_ll", 8)):
        samples = _samples(out, task)
        assert len(samples) == 4 and all(len(s["arguments"]) == 3 * per for s in samples), "3 rotations"
        parsed = [p["best"] is not None for s in samples for p in s["pearson"]["shown"]]
        assert results[task]["parse_rate,none"] == pytest.approx(np.mean(parsed))
        if any(parsed):
            r, best, worst = _recount(samples, gold)
            assert results[task]["pearson,none"] == pytest.approx(r, abs=1e-9, nan_ok=True)
            assert results[task]["best_agreement,none"] == pytest.approx(best)
            assert results[task]["worst_agreement,none"] == pytest.approx(worst)
        rates = [results[task][f"best_position_{p},none"] for p in range(1, 5)]
        assert sum(rates) == pytest.approx(1.0) or not any(parsed)
    assert results["fsb_bws_ll"]["parse_rate,none"] == 1.0, "nothing to parse by log-likelihood"


@pytest.mark.slow
def test_annotate_llm_against_transformers_serve_then_fsb_score(
    release_dataset: Path, bws_model: Path, bws_server: str, tmp_path: Path
) -> None:
    out, judgments = tmp_path / "llm.jsonl", tmp_path / "llm.csv"
    base = [str(BIN / "fsb"), "annotate", "llm", "--model", str(bws_model), "--base-url", bws_server, "--out", str(out)]
    base += ["--dataset", str(release_dataset), "--sample", "8", "--no-progress"]
    dry = _run([*base, "--dry-run"], tmp_path, OPENAI_API_KEY="sk-test-secret-123")
    assert dry.returncode == 0, dry.stderr
    assert "plan: 16 requests (8 tuples x rotations 0,2; simple random sample of 8 of 2000 tuples (seed 0))" in dry.stderr
    assert "dry run: 16 requests to send" in dry.stdout and not out.exists()
    proc = _run(base, tmp_path, OPENAI_API_KEY="sk-test-secret-123")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 16 and all(r["messages"][0]["role"] == "user" for r in rows)
    for path in tmp_path.iterdir():
        if path.is_file():
            assert "sk-test-secret-123" not in path.read_text(errors="replace"), path
    with open(judgments, newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"]
    parsed = [bwsprompt.parse_bws(r["response"]) for r in rows]
    assert len(table) - 1 == sum(p is not None for p in parsed) > 0, "parsed answers only, none guessed"
    by_shown = {tuple(r["items"]): p for r, p in zip(rows, parsed) if p is not None}
    for line in table[1:]:
        items = tuple(int(x) for x in line[:4])
        most, least = by_shown[items]
        assert (int(line[4]), int(line[5])) == (items[most - 1], items[least - 1]) and line[6] == str(bws_model)
    again = _run(base, tmp_path, OPENAI_API_KEY="sk-test-secret-123")
    assert again.returncode == 0 and "0 new, 16 already finished" in again.stderr, "a rerun sends nothing"
    score = _run([str(BIN / "fsb"), "score", str(judgments), "--invalid", "drop"], tmp_path)
    assert score.returncode == 0, score.stderr
    assert score.stdout.startswith("item,score_raw,score,")
    rel = _run([str(BIN / "fsb"), "reliability", str(judgments), "--trials", "5", "--invalid", "drop"], tmp_path)
    assert rel.returncode == 0, rel.stderr
