"""Read an lm-eval run (`--output_path` with `--log_samples`) and report every metric with a 95%
bootstrap confidence interval over sentences, beside the human ceiling and the paper's figures.

The metric functions are the harness's own (harness/utils.py), loaded by path, so the report can never
disagree with what lm-eval computed. A group (fsb, fsb_ll) is the mean over its 5 variants; since all
variants score the same sentences, its interval resamples sentences once and recomputes every variant
on the same resample.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec

from . import resources
from ._io import InputError, iter_jsonl

__all__ = ["Run", "TaskSamples", "bootstrap", "format_report", "load_run", "load_runs", "summarize"]

METRICS = ("pearson", "spearman", "mse", "parse_rate")


@cache
def harness_utils() -> ModuleType:
    """harness/utils.py as a module (the single definition of parsing and metrics)."""
    path = resources.path("harness") / "utils.py"
    loaded = importlib.util.spec_from_file_location("fsb_harness_utils", path)
    if loaded is None or loaded.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class TaskSamples:
    """One task's logged items: sentence ids, predictions (NaN where the answer did not parse), gold scores."""

    name: str
    ids: np.ndarray
    preds: np.ndarray
    golds: np.ndarray

    @property
    def parsed(self) -> np.ndarray:
        return ~np.isnan(self.preds)

    def items(self, idx: np.ndarray | None = None) -> list[tuple[float | None, float]]:
        sel = slice(None) if idx is None else idx
        return [(None if math.isnan(p) else float(p), float(g)) for p, g in zip(self.preds[sel], self.golds[sel])]


@dataclass
class Run:
    """An lm-eval run: its results file and, per leaf task, the logged samples; groups map to their variants."""

    path: Path
    results: dict[str, Any]
    tasks: dict[str, TaskSamples]
    groups: dict[str, list[str]] = field(default_factory=dict)

    @property
    def model(self) -> str:
        cfg = self.results.get("config", {})
        return f"{cfg.get('model', '?')} {cfg.get('model_args', '')}".strip()


def _results_files(path: Path) -> list[Path]:
    """The results file itself, or the newest results_*.json in each folder under `path`."""
    if path.is_file():
        return [path]
    newest: dict[Path, Path] = {}
    for f in sorted(path.rglob("results_*.json"), key=lambda f: f.name):
        newest[f.parent] = f
    if not newest:
        raise InputError(path, "no lm-eval results_*.json here; run lm_eval with --output_path and --log_samples")
    return [newest[d] for d in sorted(newest)]


def load_run(path: str | Path) -> Run:
    """Load one lm-eval run: a results JSON (or the newest one under a folder) and its samples_*.jsonl."""
    p = _results_files(Path(path))[-1] if Path(path).is_dir() else Path(path)
    try:
        results = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(p, f"not a readable lm-eval results file: {e}") from None
    stamp = p.name[len("results_") : -len(".json")]
    tasks = {}
    for name in results.get("configs", {}):
        sample_file = p.parent / f"samples_{name}_{stamp}.jsonl"
        if not sample_file.is_file():
            raise InputError(sample_file, "missing: the run was not made with --log_samples")
        ids, preds, golds = [], [], []
        for n, rec in iter_jsonl(sample_file):  # lm-eval writes these with ensure_ascii=False
            if "pearson" not in rec:
                raise InputError(sample_file, "not a Fifty Shades of Bias sample (no pearson pair)", line=n)
            pred, gold = rec["pearson"]
            ids.append(int(rec["doc"]["id"]))
            preds.append(math.nan if pred is None else float(pred))
            golds.append(float(gold))
        order = np.argsort(ids, kind="stable")
        tasks[name] = TaskSamples(name, np.asarray(ids)[order], np.asarray(preds)[order], np.asarray(golds)[order])
    groups = {g: list(subs) for g, subs in results.get("group_subtasks", {}).items() if subs}
    return Run(p, results, tasks, groups)


def load_runs(paths: list[str | Path] | str | Path) -> list[Run]:
    """Every run under the given paths: each results file, or the newest results file of every folder
    below a given folder (so `results/main`, with one run per task, gives them all)."""
    items = [paths] if isinstance(paths, (str, Path)) else paths
    return [load_run(f) for p in items for f in _results_files(Path(p))]


def _metrics(samples: list[TaskSamples]) -> dict[str, float]:
    """Each metric averaged over the variants (one variant for a leaf task), with the harness's own
    functions, so the values equal what lm-eval reported."""
    u = harness_utils()
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for s in samples:
        items = s.items()
        out["pearson"].append(u.pearson(items))
        out["spearman"].append(u.spearman(items))
        out["mse"].append(u.mse(items))
        out["parse_rate"].append(float(s.parsed.mean()) if s.ids.size else math.nan)
    return {m: float(np.mean(v)) for m, v in out.items()}


def _masked_pearson(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r over the `valid` entries of each row; NaN where fewer than 2 or either side is constant."""
    m = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.where(valid, x, 0.0).sum(axis=1) / m
        my = np.where(valid, y, 0.0).sum(axis=1) / m
        dx = np.where(valid, x - mx[:, None], 0.0)
        dy = np.where(valid, y - my[:, None], 0.0)
        r = (dx * dy).sum(axis=1) / np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    constant = lambda a: np.where(valid, a, np.inf).min(axis=1) == np.where(valid, a, -np.inf).max(axis=1)  # noqa: E731
    return np.where((m >= 2) & ~constant(x) & ~constant(y), r, np.nan)


def _draws(s: TaskSamples, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric on every resample (rows of `idx`), vectorised; the same definitions as the harness."""
    import scipy.stats

    p, g = s.preds[idx], s.golds[idx]
    valid = ~np.isnan(p)
    n_valid = valid.sum(axis=1)
    gv = np.where(valid, g, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        mse = np.where(valid, (p - g) ** 2, 0.0).sum(axis=1) / n_valid
    ranks_p = scipy.stats.rankdata(p, axis=1, nan_policy="omit")
    ranks_g = scipy.stats.rankdata(gv, axis=1, nan_policy="omit")
    pearson = _masked_pearson(p, g, valid)
    return {
        "pearson": pearson,
        "spearman": np.where(np.isnan(pearson), np.nan, _masked_pearson(ranks_p, ranks_g, valid)),
        "mse": np.where(n_valid > 0, mse, np.nan),
        "parse_rate": valid.mean(axis=1),
    }


def bootstrap(samples: list[TaskSamples], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, dict[str, Any]]:
    """Percentile interval of each metric, resampling sentences with replacement: the same resamples for
    every variant (they all score the same sentences), a group's value being the mean over variants.

    A resample on which a correlation is undefined (constant answers) is left out; `defined` is the
    share of resamples that count, and below one half no interval is given.
    """
    n = samples[0].ids.size
    if any(not np.array_equal(s.ids, samples[0].ids) for s in samples):
        raise ValueError("the variants of a group must score the same sentences")
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    per_variant = [_draws(s, idx) for s in samples]
    alpha = (1 - level) / 2
    out = {}
    for m in METRICS:
        d = np.mean([v[m] for v in per_variant], axis=0)  # NaN in any variant makes the group's draw NaN
        ok = d[~np.isnan(d)]
        share = ok.size / n_boot
        lo, hi = (float(np.quantile(ok, alpha)), float(np.quantile(ok, 1 - alpha))) if share >= 0.5 else (math.nan, math.nan)
        out[m] = {"low": lo, "high": hi, "defined": share}
    return out


def _unit(samples: list[TaskSamples], n_boot: int, seed: int) -> dict[str, Any]:
    parsed = [s.preds[s.parsed] for s in samples]
    return {
        "variants": len(samples),
        "sentences": int(samples[0].ids.size),
        "distinct_answers": min(int(np.unique(p).size) for p in parsed),
        "values": _metrics(samples),
        "ci95": bootstrap(samples, n_boot=n_boot, seed=seed),
    }


def summarize(run: Run, n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per reported task (groups, and leaf tasks outside any group): metric values, 95% intervals,
    sizes and the fewest distinct answers; a group also lists its variants the same way."""
    in_group = {t for subs in run.groups.values() for t in subs}
    out: dict[str, dict[str, Any]] = {}
    for group, subs in run.groups.items():
        samples = [run.tasks[t] for t in subs if t in run.tasks]
        if samples:
            out[group] = _unit(samples, n_boot, seed)
            out[group]["by_variant"] = {s.name: _unit([s], n_boot, seed) for s in samples}
    for name, s in run.tasks.items():
        if name not in in_group:
            out[name] = _unit([s], n_boot, seed)
    return out


def _fmt(value: float, ci: dict[str, Any]) -> str:
    if math.isnan(value):
        return "n/a"
    if math.isnan(ci["low"]):
        return f"{value:.3f}"
    mark = "" if ci["defined"] == 1.0 else "*"
    return f"{value:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]{mark}"


def _ceiling(dataset: str | None, runs: list[Run]) -> tuple[dict[str, Any] | None, str]:
    """The split-half reliability of the dataset the runs scored, and a note when it cannot be shown.

    The dataset found (argument, $FSB_DATASET, last build) is used only if its scores are the gold
    scores the runs logged, so a ceiling is never shown for another dataset."""
    try:
        where = spec.locate(dataset)
    except spec.DatasetNotFound:
        return None, "no dataset found to read the ceiling from (give --dataset)"
    stats_path = Path(where) / "stats.json"
    if not stats_path.is_file():
        return None, f"{where} has no stats.json (a Hub dataset? give the local build with --dataset)"
    rows = spec.load(source=where)[spec.SPLIT]
    score = dict(zip(rows["id"], rows["score"]))
    for run in runs:
        for s in run.tasks.values():
            if any(abs(score.get(int(i), math.inf) - g) > 1e-9 for i, g in zip(s.ids, s.golds)):
                return None, f"the scores in {where} are not the ones this run was scored against (give --dataset)"
    return json.loads(stats_path.read_text(encoding="utf-8")), str(where)


def format_report(
    runs: list[Run], dataset: str | None = None, timings: dict[str, float] | None = None, model_note: str | None = None, n_boot: int = 1000
) -> str:
    """The printed report: a row per task with 95% intervals, the human ceiling, the paper's Table 6."""
    lines = ["Fifty Shades of Bias: agreement of model scores with the human scores"]
    for run in runs:
        lines.append(f"run: {run.path}")
        lines.append(f"model: {model_note or run.model}")
    header = f"{'task':<12} {'sents':>5} {'sets':>4} {'distinct':>8}  " + "  ".join(f"{m + ' [95% CI]':<26}" for m in METRICS)
    if timings:
        header += "  time"
    lines += ["", header, "-" * len(header)]

    def row(name: str, s: dict[str, Any], extra: str = "") -> str:
        cells = [f"{_fmt(s['values'][m], s['ci95'][m]):<26}" for m in METRICS]
        return f"{name:<12} {s['sentences']:>5} {s['variants']:>4} {s['distinct_answers']:>8}  " + "  ".join(cells) + extra

    for run in runs:
        for name, s in summarize(run, n_boot=n_boot).items():
            lines.append(row(name, s, f"  {timings[name]:.0f} s" if timings and name in timings else ""))
            for variant, v in s.get("by_variant", {}).items():
                lines.append(row(f"  {variant.rsplit('_', 1)[-1]}", v))
    lines += [
        "",
        "Correlations and MSE are over the answers that parse (a bare number in [0, 1] on the first line);",
        "parse_rate is the share that did. A group is the mean over its 5 few-shot sets; a correlation is n/a",
        "(undefined) when a set's answers are constant. distinct: the number of different answers (for a",
        "group, the fewest over its sets). Intervals: bootstrap over sentences;",
        "* marks an interval over the resamples on which the correlation was defined (not all of them).",
        "",
        "Reference points (NOT this model):",
    ]
    stats, where = _ceiling(dataset, runs)
    if stats is None:
        lines.append(f"  human split-half reliability (the ceiling): not shown: {where}")
    else:
        shr = stats["shr"]
        lines.insert(1, f"dataset: {where} ({stats['n_items']} sentences, fingerprint {stats['fingerprint'][:16]})")
        lines.append(
            "  human split-half reliability (the ceiling), this dataset: "
            f"Pearson {shr['pearson']['mean']:.3f} ± {shr['pearson']['sd']:.3f}, "
            f"Spearman {shr['spearman']['mean']:.3f} ± {shr['spearman']['sd']:.3f} ({shr['trials']} trials)"
        )
    lines.append("  the paper's Table 6 (Hada et al. 2023; full dataset, earlier judgments), Pearson r / MSE:")
    lines += [f"    {name:<30} {r:>6.3f} / {m:.3f}" for name, r, m in spec.PAPER["table6"]]
    return "\n".join(lines)
