"""End to end through lm-eval's own CLI, from a temporary folder with no --include_path, with a real
tiny model (`hf` backend) and a real OpenAI-compatible server (`local-completions`); and through
`fsb eval` (lm-eval's Python API). Metrics are recomputed from the logged samples by the textbook formulas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fifty_shades_of_bias as spec
from fsb.annotate import bwsprompt
from fsb.evaluate import fewshot
from fsb.evaluate.results import load_run
from tests._support import make_raw
from tests.evaluate.test_harness import _samples_check

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
EXAMPLE = re.compile(r"Sentence: (.*?)\nScore: (\d\.\d\d)\n\n")


def _run(cmd: list[str], cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "FSB_HOME": str(home), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, check=False, timeout=900)


@pytest.fixture(scope="module")
def cli_run(release: Path, scoring_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`fsb build` somewhere (recorded as the last build), then `lm_eval` from an unrelated empty folder."""
    home = tmp_path_factory.mktemp("home")
    data = tmp_path_factory.mktemp("elsewhere") / "my-build"
    built = _run([str(BIN / "fsb"), "build", "--raw-dir", str(release), "--out", str(data)], cwd=tmp_path_factory.mktemp("b"), home=home)
    assert built.returncode == 0, built.stderr
    cwd = tmp_path_factory.mktemp("anywhere")
    out = cwd / "out"
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={scoring_model}", "--device", "cpu"]
    cmd += ["--tasks", "fsb,fsb_ll,fsb_0shot", "--metadata", json.dumps({"fsb_per_bin": 3}), "--log_samples", "--output_path", str(out)]
    proc = _run(cmd, cwd=cwd, home=home)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"home": home, "data": data, "out": out, "cwd": cwd}


def _samples(out: Path, task: str) -> list[dict]:
    (path,) = sorted(out.rglob(f"samples_{task}_*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_lm_eval_cli_finds_the_task_and_the_last_build(cli_run: dict[str, Path]) -> None:
    run = load_run(cli_run["out"])
    assert set(run.groups) == {"fsb", "fsb_ll"}
    assert set(run.tasks) == {*(f"fsb_set{k}" for k in range(5)), *(f"fsb_ll_set{k}" for k in range(5)), "fsb_0shot"}
    assert all(s.ids.size == 12 for s in run.tasks.values()), "3 sentences per bin x 4 bins"
    built_ids = set(spec.load(source=str(cli_run["data"]))[spec.SPLIT]["id"])
    assert set(run.tasks["fsb_set0"].ids) <= built_ids
    for g, subs in run.groups.items():
        vals = [run.results["results"][t]["pearson,none"] for t in subs]
        assert run.results["results"][g]["pearson,none"] == pytest.approx(float(np.mean(vals)), nan_ok=True)


def test_every_metric_equals_the_textbook_formulas_on_the_logged_samples(cli_run: dict[str, Path]) -> None:
    run = load_run(cli_run["out"])
    _samples_check(run)
    # the scoring model's answers parse and vary, so these are real numbers, not NaN
    assert run.results["results"]["fsb_set0"]["parse_rate,none"] > 0.5
    assert not np.isnan(run.results["results"]["fsb_ll_set0"]["pearson,none"])


def test_fewshot_sets_in_the_logged_prompts(cli_run: dict[str, Path]) -> None:
    data = spec.load(source=str(cli_run["data"]))[spec.SPLIT]
    score = dict(zip(data["text"], data["score"]))
    per_variant = []
    for k in range(5):
        prompts = [s["arguments"]["gen_args_0"]["arg_0"] for s in _samples(cli_run["out"], f"fsb_set{k}")]
        examples = [tuple(EXAMPLE.findall(p)) for p in prompts]
        assert len(set(examples)) == 1, "every item of a variant sees the same 8 examples, in the same order"
        shots = examples[0]
        assert len(shots) == 8
        assert [bwsprompt.fewshot_bin(np.array([score[t]]))[0] for t, _ in shots].count(0) == 2
        assert np.bincount([bwsprompt.fewshot_bin(np.array([score[t]]))[0] for t, _ in shots], minlength=4).tolist() == [2, 2, 2, 2]
        assert all(a == f"{score[t]:.2f}" for t, a in shots), "the examples are answered with their human scores"
        for p, s in zip(prompts, _samples(cli_run["out"], f"fsb_set{k}")):
            assert p.startswith("On a fine-grained real-valued scale of 0 to 1")
            assert p.endswith(f"Sentence: {s['doc']['text']}\nScore:")
            assert s["doc"]["text"] not in {t for t, _ in shots}, "never scored with itself among its examples"
        per_variant.append({t for t, _ in shots})
    assert all(a.isdisjoint(b) for i, a in enumerate(per_variant) for b in per_variant[i + 1 :]), "the 5 sets differ (disjoint)"
    zero = _samples(cli_run["out"], "fsb_0shot")[0]["arguments"]["gen_args_0"]["arg_0"]
    assert not EXAMPLE.findall(zero) and zero.count("Sentence:") == 1


def test_fsb_report_reads_the_cli_output(cli_run: dict[str, Path]) -> None:
    cmd = [str(BIN / "fsb"), "report", str(cli_run["out"]), "--json", "--bootstrap", "100", "--trials", "10"]
    proc = _run(cmd, cwd=cli_run["cwd"], home=cli_run["home"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = {r["task"]: r for r in report["rows"]}
    results = load_run(cli_run["out"]).results["results"]
    nan = lambda v: float("nan") if v is None else v  # noqa: E731  (JSON writes NaN as null)
    for name in ("fsb", "fsb_ll", "fsb_0shot"):
        for m in ("pearson", "mse"):
            assert nan(rows[name]["values"][m]) == pytest.approx(results[name][f"{m},none"], nan_ok=True)
        ci = rows[name]["ci95"]["mse"]
        assert ci["low"] <= rows[name]["values"]["mse"] <= ci["high"] and ci["defined"] == 1.0
        assert "sample: 12 of 960 sentences, not comparable with the 960-sentence figures" in rows[name]["flags"]
    assert rows["fsb_ll"]["values"]["parse_rate"] is None, "a log-likelihood task has no parse rate"
    assert rows["fsb"]["values"]["parse_rate"] == pytest.approx(results["fsb"]["parse_rate,none"])
    assert report["human_reference"][0]["sentences"] == 12
    text = _run([str(BIN / "fsb"), "report", str(cli_run["out"]), "--trials", "10"], cwd=cli_run["cwd"], home=cli_run["home"]).stdout
    # the compact table's ceiling column, and the human reference section for the sample's own 12 sentences
    assert "noise ceiling (its sentences)" in text and "## Human reference figures" in text
    assert "On 12 sentences" in text or "On the 12 scored sentences" in text
    assert "GPT-4 0.813 / 0.024" in text and "QUOTED" in text  # the paper's Table 6, one line of the reference points
    # a progress bar prints "12.3it/s" or "%|": not a temporary path that happens to contain "it/s"
    assert text.count("runs and files:") == 1 and not re.search(r"\d(?:it|s)/(?:s|it)\b|%\|", text)


def test_fsb_eval_api_gives_the_same_numbers_as_the_cli(cli_run: dict[str, Path], scoring_model: Path) -> None:
    out = cli_run["cwd"] / "api"
    cmd = [str(BIN / "fsb"), "eval", "--model", "hf", "--model-args", f"pretrained={scoring_model}", "--device", "cpu"]
    cmd += ["--tasks", "fsb,fsb_ll", "--per-bin", "3", "--output-path", str(out)]
    proc = _run(cmd, cwd=cli_run["cwd"], home=cli_run["home"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "pearson [95% CI]" in proc.stdout
    api, cli = load_run(out), load_run(cli_run["out"])
    for task in api.tasks:
        np.testing.assert_array_equal(api.tasks[task].ids, cli.tasks[task].ids)
        np.testing.assert_allclose(api.tasks[task].preds, cli.tasks[task].preds, rtol=1e-6, equal_nan=True)
    for name in ("fsb", "fsb_ll"):
        for m in ("pearson,none", "spearman,none", "mse,none"):
            assert api.results["results"][name][m] == pytest.approx(cli.results["results"][name][m], rel=1e-6, nan_ok=True)


def test_chat_models_with_the_chat_template(cli_run: dict[str, Path], scoring_model: Path) -> None:
    out = cli_run["cwd"] / "chat"
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={scoring_model}", "--device", "cpu", "--tasks", "fsb_set1"]
    cmd += ["--apply_chat_template", "--fewshot_as_multiturn", "--metadata", json.dumps({"fsb_per_bin": 1}), "--log_samples"]
    proc = _run([*cmd, "--output_path", str(out)], cwd=cli_run["cwd"], home=cli_run["home"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    prompt = _samples(out, "fsb_set1")[0]["arguments"]["gen_args_0"]["arg_0"]
    assert prompt.startswith("<|system|>\nOn a fine-grained real-valued scale")
    assert prompt.count("<|user|>") == 9 and prompt.count("<|assistant|>") == 9, "8 example turns, then the query"
    assert prompt.endswith("<|assistant|>\n")
    _samples_check(load_run(out))


def test_no_dataset_anywhere_fails_with_directions(tmp_path: Path, scoring_model: Path) -> None:
    home, cwd = tmp_path / "empty-home", tmp_path / "empty-cwd"
    cwd.mkdir()
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={scoring_model}", "--device", "cpu", "--tasks", "fsb_set0"]
    proc = _run(cmd, cwd=cwd, home=home)
    assert proc.returncode != 0
    assert "No Fifty Shades of Bias dataset found" in proc.stderr
    assert "fsb build" in proc.stderr and "FSB_DATASET" in proc.stderr


def test_fsb_dataset_points_the_task_elsewhere(cli_run: dict[str, Path], scoring_model: Path, tmp_path: Path) -> None:
    g, a = make_raw(tmp_path / "raw", n=200, seed=5)
    other = tmp_path / "other-dataset"
    built = _run(
        [str(BIN / "fsb"), "build", "--generations", str(g), "--annotations", str(a), "--out", str(other), "--no-record"],
        tmp_path,
        cli_run["home"],
    )
    assert built.returncode == 0, built.stderr
    out = tmp_path / "out"
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={scoring_model}", "--device", "cpu", "--tasks", "fsb_set0"]
    cmd += ["--metadata", json.dumps({"fsb_per_bin": 2}), "--log_samples", "--output_path", str(out)]
    proc = _run(cmd, cwd=cli_run["cwd"], home=cli_run["home"], FSB_DATASET=str(other))
    assert proc.returncode == 0, proc.stderr[-4000:]
    docs = [s["doc"] for s in _samples(out, "fsb_set0")]
    assert len(docs) == 8 and all(d["text"].startswith("generated sentence number") for d in docs)


def test_local_completions_against_transformers_serve(cli_run: dict[str, Path], scoring_model: Path, scoring_server: str) -> None:
    out = cli_run["cwd"] / "served"
    model_args = (
        f"model={scoring_model},base_url={scoring_server}/completions,tokenizer_backend=none,tokenized_requests=False,max_retries=2"
    )
    cmd = [str(BIN / "lm_eval"), "--model", "local-completions", "--model_args", model_args, "--tasks", "fsb_set0"]
    cmd += ["--metadata", json.dumps({"fsb_per_bin": 2}), "--log_samples", "--output_path", str(out)]
    proc = _run(cmd, cwd=cli_run["cwd"], home=cli_run["home"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = load_run(out)
    assert run.tasks["fsb_set0"].ids.size == 8
    assert run.tasks["fsb_set0"].parsed.sum() >= 4, "the served model answers in the learned format"
    _samples_check(run)


def _lm_eval_hf(model: Path, task: str, meta: dict, out: Path, *extra: str) -> list[str]:
    cmd = [str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}", "--device", "cpu", "--tasks", task]
    return [*cmd, "--metadata", json.dumps(meta), "--log_samples", "--output_path", str(out), *extra]


def test_request_cache_never_pairs_answers_with_other_sentences(release_dataset: Path, scoring_model: Path, tmp_path: Path) -> None:
    """lm-eval's --cache_requests keys its cache by task name and shot count only. Runs with other
    sentences (more of them, or as many but others) must rebuild the requests, never score a cached
    prompt's answer against this run's sentence by position; a run like the last one uses the cache."""
    cache = tmp_path / "lm-cache"
    env = {"FSB_DATASET": str(release_dataset), "LM_HARNESS_CACHE_PATH": str(cache)}
    runs = [
        ("first", {"fsb_per_bin": 1}, 4, False),
        ("more", {"fsb_per_bin": 2}, 8, True),  # was an IndexError in utils.py
        ("others", {"fsb_per_bin": 2, "fsb_sample_seed": 7}, 8, True),  # was silently scored against other sentences
        ("again", {"fsb_per_bin": 2, "fsb_sample_seed": 7}, 8, False),
    ]
    stats = json.loads((release_dataset / "stats.json").read_text())
    logged = {}
    for name, meta, n, rebuilt in runs:
        out = tmp_path / name
        proc = _run(_lm_eval_hf(scoring_model, "fsb_set0", meta, out, "--cache_requests", "true"), tmp_path, tmp_path / "home", **env)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert ("the request cache does not match this run" in proc.stderr) == rebuilt, name
        assert ("Building contexts for fsb_set0" in proc.stderr) == (rebuilt or name == "first"), name
        samples = _samples(out, "fsb_set0")
        assert len(samples) == n
        for s in samples:
            assert s["arguments"]["gen_args_0"]["arg_0"].endswith(f"Sentence: {s['doc']['text']}\nScore:"), "the answer is to this sentence"
            assert s["pearson"][1] == s["doc"]["score"]
        logged[name] = samples
        config = load_run(out).results["configs"]["fsb_set0"]
        assert config["dataset_path"] == str(release_dataset.resolve())
        assert config["metadata"]["fsb_source"]["fingerprint"] == stats["fingerprint"]
    assert list(cache.glob("requests-fsb_set0-*")), "the cache is where LM_HARNESS_CACHE_PATH says"
    assert {s["doc"]["id"] for s in logged["more"]} != {s["doc"]["id"] for s in logged["others"]}
    assert [s["resps"] for s in logged["again"]] == [s["resps"] for s in logged["others"]]


def test_num_fewshot_above_a_set_is_a_clear_error(release_dataset: Path, scoring_model: Path, tmp_path: Path) -> None:
    cmd = _lm_eval_hf(scoring_model, "fsb_set0", {"fsb_sample": 2}, tmp_path / "out", "--num_fewshot", "9")
    proc = _run(cmd, tmp_path, tmp_path / "home", FSB_DATASET=str(release_dataset))
    assert proc.returncode != 0
    assert "--num_fewshot 9: a Fifty Shades of Bias few-shot set holds 8 examples (2 per score bin); use 0 to 8" in proc.stderr
    assert "AssertionError" not in proc.stderr


def test_upstream_chat_variant_against_transformers_serve(
    release_dataset: Path, scoring_model: Path, scoring_server: str, tmp_path: Path
) -> None:
    """fsb_upstream_set0 through a real chat server: the system message is the instruction, each example a
    user turn with the bare sentence and an assistant turn with the bare score, bin by bin low to high, at the
    release file's precision; up to 100 new tokens; without chat turns the task refuses to run."""
    out = tmp_path / "upstream"
    model_args = f"model={scoring_model},base_url={scoring_server}/chat/completions,tokenizer_backend=none,max_retries=2"
    cmd = [str(BIN / "lm_eval"), "--model", "local-chat-completions", "--model_args", model_args, "--tasks", "fsb_upstream_set0"]
    cmd += ["--metadata", json.dumps({"fsb_sample": 3}), "--log_samples", "--output_path", str(out)]
    env = {"FSB_DATASET": str(release_dataset)}
    refused = _run(cmd, tmp_path, tmp_path / "home", **env)
    assert refused.returncode != 0 and "run it with --apply_chat_template --fewshot_as_multiturn" in refused.stderr
    proc = _run([*cmd, "--apply_chat_template", "--fewshot_as_multiturn"], tmp_path, tmp_path / "home", **env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = spec.load(source=str(release_dataset))[spec.SPLIT]
    by_text = {t: (s, r) for t, s, r in zip(rows["text"], rows["score"], rows["score_raw"])}
    samples = _samples(out, "fsb_upstream_set0")
    assert len(samples) == 3
    shots = fewshot.load(fewshot_set=0, fsb_dataset=str(release_dataset))["fewshot"]
    for s in samples:
        logged = s["arguments"]["gen_args_0"]["arg_0"]  # the messages, as JSON (inside a list for API models)
        messages = json.loads(logged[0] if isinstance(logged, list) else logged)
        assert [m["role"] for m in messages] == ["system", *["user", "assistant"] * 8, "user"]
        assert messages[0]["content"].startswith("On a fine-grained real-valued scale of 0 to 1")
        assert messages[0]["content"].endswith("Only give the score and nothing else.")
        users, answers = [m["content"] for m in messages[1:-1:2]], [m["content"] for m in messages[2:-1:2]]
        assert sorted(users) == sorted(shots["text"]), "the bare sentences of the set"
        bins = bwsprompt.fewshot_bin([float(a) for a in answers]).tolist()
        assert bins == sorted(bins) == [0, 0, 1, 1, 2, 2, 3, 3], "bin by bin from low to high, as upstream"
        assert answers == [str((round(by_text[u][1], 3) + 1) / 2) for u in users], "bare scores at the release's precision"
        assert messages[-1] == {"role": "user", "content": s["doc"]["text"]}
        assert s["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"] == 100
    _samples_check(load_run(out))
