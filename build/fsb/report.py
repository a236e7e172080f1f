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
from ._io import InputError

__all__ = ["Run", "TaskSamples", "bootstrap", "format_report", "load_run", "summarize"]

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


def load_run(path: str | Path) -> Run:
    """Load a results JSON (or the newest one under a folder) and its samples_*.jsonl files."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.rglob("results_*.json"), key=lambda f: f.name)
        if not found:
            raise InputError(p, "no lm-eval results_*.json here; run lm_eval with --output_path and --log_samples")
        p = found[-1]
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
        for n, line in enumerate(sample_file.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            rec = json.loads(line)
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


def _metrics(samples: list[TaskSamples], idx: np.ndarray | None = None) -> dict[str, float]:
    """Each metric averaged over the variants (one variant for a leaf task), on the rows `idx`."""
    u = harness_utils()
    out = {m: [] for m in METRICS}
    for s in samples:
        items = s.items(idx)
        out["pearson"].append(u.pearson(items))
        out["spearman"].append(u.spearman(items))
        out["mse"].append(u.mse(items))
        out["parse_rate"].append(float(np.mean([p is not None for p, _ in items])) if items else math.nan)
    return {m: float(np.mean(v)) for m, v in out.items()}


def bootstrap(samples: list[TaskSamples], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile interval of each metric, resampling sentences with replacement (the same resample for
    every variant, which all score the same sentences)."""
    n = samples[0].ids.size
    if any(not np.array_equal(s.ids, samples[0].ids) for s in samples):
        raise ValueError("the variants of a group must score the same sentences")
    rng = np.random.default_rng(seed)
    draws = {m: [] for m in METRICS}
    for _ in range(n_boot):
        values = _metrics(samples, rng.integers(0, n, size=n))
        for m in METRICS:
            draws[m].append(values[m])
    alpha = (1 - level) / 2
    out = {}
    for m in METRICS:
        d = np.asarray(draws[m])
        d = d[~np.isnan(d)]
        out[m] = (float(np.quantile(d, alpha)), float(np.quantile(d, 1 - alpha))) if d.size >= n_boot // 2 else (math.nan, math.nan)
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


def _fmt(value: float, lo: float, hi: float) -> str:
    if math.isnan(value):
        return "n/a"
    ci = "" if math.isnan(lo) else f" [{lo:.3f}, {hi:.3f}]"
    return f"{value:.3f}{ci}"


def _ceiling(dataset: str | None) -> dict[str, Any] | None:
    try:
        where = Path(spec.locate(dataset))
    except spec.DatasetNotFound:
        return None
    stats = where / "stats.json"
    return json.loads(stats.read_text(encoding="utf-8")) if stats.is_file() else None


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
        cells = [f"{_fmt(s['values'][m], *s['ci95'][m]):<26}" for m in METRICS]
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
        "(undefined) when a set's answers are constant (distinct = 1). Intervals: bootstrap over sentences.",
        "",
        "Reference points (NOT this model):",
    ]
    stats = _ceiling(dataset)
    if stats is not None:
        shr = stats["shr"]
        lines.append(
            "  human split-half reliability (the ceiling), this dataset: "
            f"Pearson {shr['pearson']['mean']:.3f} ± {shr['pearson']['sd']:.3f}, "
            f"Spearman {shr['spearman']['mean']:.3f} ± {shr['spearman']['sd']:.3f} ({shr['trials']} trials)"
        )
    lines.append("  the paper's Table 6 (Hada et al. 2023; full dataset, earlier judgments), Pearson r / MSE:")
    lines += [f"    {name:<30} {r:>6.3f} / {m:.3f}" for name, r, m in spec.PAPER["table6"]]
    return "\n".join(lines)
