"""lm-eval runs read from their files (`load_run`, `load_runs`): the results file and each logged sample
are checked before use, so that a damaged or foreign file is refused in one line that names the file,
the line and the field (InputError, exit 2), never a traceback.

lm-eval writes `results_<stamp>.json` (an object: `configs` maps each task to its config, `config` the
run's model and options, `group_subtasks` each group's variants) and one `samples_<task>_<stamp>.jsonl`
per task (an object a line; these tasks log `pearson` as [prediction or null, gold] for a rating task or
a per-tuple record for a best-worst task, and `doc` the document with its sentence `id`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.readers import InputError, iter_jsonl
from fsb.evaluate.metrics import bws_counts

__all__ = ["Run", "TaskSamples", "load_run", "load_runs", "rating_sample", "read_results", "tuple_record"]

_TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a task name that is also a plain file-name part
_RECORD_LISTS = ("items", "scores", "majority_best", "majority_worst", "shown")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_results(path: Path) -> dict[str, Any]:
    """The results file at `path`, checked: an object whose `configs`, `config`, `group_subtasks` and
    `results` (where present) have the shapes `fsb report` reads.

    Parameters
    ----------
    path
        An lm-eval `results_*.json` file.

    Returns
    -------
    dict
        The parsed results.

    Raises
    ------
    InputError
        The file is unreadable, not JSON, or a field has another shape (named in the message).
    """
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(path, f"not a readable lm-eval results file: {e}") from None
    except RecursionError:
        raise InputError(path, "not a readable lm-eval results file: nested too deeply") from None
    if not isinstance(results, dict):
        raise InputError(path, f"not an lm-eval results file: the top level is a JSON {type(results).__name__}, not an object")
    configs = results.get("configs", {})
    if not isinstance(configs, dict):
        raise InputError(path, f"'configs' is {configs!r:.40}, not an object of task configs", field="configs")
    for name, cfg in configs.items():
        if not _TASK_NAME.fullmatch(name):
            raise InputError(path, f"task name {name!r:.60} is not a plain name", field="configs")
        if not isinstance(cfg, dict):
            raise InputError(path, f"the config of {name} is {cfg!r:.40}, not an object", field=f"configs.{name}")
        meta = cfg.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise InputError(path, f"the metadata of {name} is not an object", field=f"configs.{name}.metadata")
        if isinstance(meta, dict):
            _check_metadata(path, name, meta)
    _check_config(path, results.get("config", {}))
    groups = results.get("group_subtasks", {})
    if not isinstance(groups, dict) or not all(isinstance(v, list) and all(isinstance(t, str) for t in v) for v in groups.values()):
        raise InputError(path, "'group_subtasks' is not an object of task-name lists", field="group_subtasks")
    scores = results.get("results", {})
    if not isinstance(scores, dict) or not all(isinstance(v, dict) for v in scores.values()):
        raise InputError(path, "'results' is not an object of per-task objects", field="results")
    return results


def _check_metadata(path: Path, name: str, meta: dict[str, Any]) -> None:
    source = meta.get("fsb_source")
    if source is not None and not isinstance(source, dict):
        raise InputError(path, f"the fsb_source of {name} is not an object", field=f"configs.{name}.metadata.fsb_source")
    per_bin = meta.get("fsb_per_bin")
    if per_bin is not None and not (_integer(per_bin) or (isinstance(per_bin, str) and per_bin.strip().isdigit())):
        raise InputError(path, f"fsb_per_bin {per_bin!r:.40} of {name} is not a whole number", field=f"configs.{name}.metadata.fsb_per_bin")


def _check_config(path: Path, cfg: Any) -> None:
    if not isinstance(cfg, dict):
        raise InputError(path, f"'config' is {cfg!r:.40}, not an object", field="config")
    limit = cfg.get("limit")
    if limit is not None and not _number(limit):
        raise InputError(path, f"'config.limit' is {limit!r:.40}, not a number", field="config.limit")
    if not isinstance(cfg.get("model_args", ""), (str, dict)):
        raise InputError(path, "'config.model_args' is neither a string nor an object", field="config.model_args")


def rating_sample(path: Path, line: int, rec: dict[str, Any]) -> tuple[int, float | None, float, dict[str, Any]]:
    """(sentence id, prediction or None, gold, doc) of one logged rating sample, checked.

    Parameters
    ----------
    path, line
        The samples file and the line (for the message).
    rec
        The line's object.

    Returns
    -------
    tuple
        The sentence id (an integer, or a string of digits), the prediction, the gold score, the doc.
    """
    pair = rec["pearson"]
    if not isinstance(pair, list) or len(pair) != 2 or not (pair[0] is None or _number(pair[0])) or not _number(pair[1]):
        raise InputError(path, f"'pearson' is {pair!r:.60}, not [prediction or null, gold score]", line=line, field="pearson")
    doc = rec.get("doc")
    if not isinstance(doc, dict) or "id" not in doc:
        raise InputError(path, "no 'doc' object with the sentence 'id'", line=line, field="doc.id")
    raw = doc["id"]
    if _integer(raw):
        sid = raw
    elif isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit():
        sid = int(raw.strip())
    else:
        raise InputError(path, f"sentence id {raw!r:.40} is not a whole number", line=line, field="doc.id")
    return sid, None if pair[0] is None else float(pair[0]), float(pair[1]), doc


def tuple_record(path: Path, line: int, rec: dict[str, Any]) -> dict[str, Any]:
    """The per-tuple record of one logged best-worst sample, checked (`metrics.bws_record`'s shape).

    Parameters
    ----------
    path, line
        The samples file and the line (for the message).
    rec
        The `pearson` value of the line.

    Returns
    -------
    dict
        The record, unchanged.
    """

    def bad(what: str, field: str) -> InputError:
        return InputError(path, f"not a best-worst record: {what}", line=line, field=f"pearson.{field}")

    if not all(isinstance(rec.get(k), list) for k in _RECORD_LISTS):
        raise bad(f"{', '.join(_RECORD_LISTS)} must be lists", "items")
    items = rec["items"]
    if not items or not all(_integer(i) for i in items) or len(set(items)) != len(items):
        raise bad("items must be distinct whole numbers", "items")
    if len(rec["scores"]) != len(items) or not all(_number(s) for s in rec["scores"]):
        raise bad("scores must be one number per item", "scores")
    for side in ("majority_best", "majority_worst"):
        if not all(_integer(i) and i in items for i in rec[side]):
            raise bad(f"{side} must name items of the tuple", side)
    for s in rec["shown"]:
        if not isinstance(s, dict) or not _integer(s.get("shift")):
            raise bad("each presentation needs a whole-number shift", "shown")
        picks = [s.get(k) for k in ("best", "worst", "best_item", "worst_item")]
        parsed = all(_integer(p) for p in picks) and picks[2] in items and picks[3] in items
        if not (all(p is None for p in picks) or parsed):
            raise bad("a presentation's best/worst must be positions with their items, or all null", "shown")
    return rec


# --- runs ---------------------------------------------------------------------------------------------


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

    def subset(self, mask: np.ndarray) -> TaskSamples:
        return TaskSamples(self.name, self.ids[mask], self.preds[mask], self.golds[mask])


@dataclass
class Run:
    """An lm-eval run: its results file and, per leaf task, the logged samples; groups map to their variants."""

    path: Path
    results: dict[str, Any]
    tasks: dict[str, TaskSamples]
    groups: dict[str, list[str]] = field(default_factory=dict)
    docs: dict[int, dict[str, Any]] = field(default_factory=dict)
    bws: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # best-worst tasks: one record per tuple

    @property
    def model(self) -> str:
        cfg = self.results.get("config", {})
        return f"{cfg.get('model', '?')} {cfg.get('model_args', '')}".strip()

    @property
    def model_name(self) -> str:
        """A short name: the last path part of `pretrained=` / `model=` in the model args, else the backend."""
        cfg = self.results.get("config", {})
        args = cfg.get("model_args", "")
        if isinstance(args, dict):
            args = ",".join(f"{k}={v}" for k, v in args.items())
        found = re.search(r"(?:^|,)\s*(?:pretrained=)+([^,]+)", str(args)) or re.search(r"(?:^|,)\s*model=([^,]+)", str(args))
        return Path(found.group(1)).name if found else str(cfg.get("model", "?"))

    @property
    def limit(self) -> float | None:
        return self.results.get("config", {}).get("limit")


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
    """Load one lm-eval run: a results JSON (or the newest one under a folder) and its samples_*.jsonl,
    each checked (evaluate.runfiles): a damaged or foreign file is one InputError naming file, line, field."""
    p = _results_files(Path(path))[-1] if Path(path).is_dir() else Path(path)
    results = read_results(p)
    stamp = p.name[len("results_") : -len(".json")]
    tasks, docs, bws = {}, {}, {}
    for name in results.get("configs", {}):
        sample_file = p.parent / f"samples_{name}_{stamp}.jsonl"
        if not sample_file.is_file():
            raise InputError(sample_file, "missing: the run was not made with --log_samples")
        ids, preds, golds = [], [], []
        records = []
        for n, rec in iter_jsonl(sample_file):  # lm-eval writes these with ensure_ascii=False
            if "pearson" not in rec:
                raise InputError(sample_file, "not a Fifty Shades of Bias sample (no pearson pair)", line=n)
            if isinstance(rec["pearson"], dict):  # a best-worst task (fsb_bws*): one record per tuple
                records.append(tuple_record(sample_file, n, rec["pearson"]))
                continue
            sid, pred, gold, doc = rating_sample(sample_file, n, rec)
            if records:
                raise InputError(sample_file, "a rating sample among best-worst records", line=n, field="pearson")
            ids.append(sid)
            docs.setdefault(sid, doc)
            preds.append(math.nan if pred is None else pred)
            golds.append(gold)
        if records and ids:
            raise InputError(sample_file, "rating samples and best-worst records in one task", field="pearson")
        if records:  # the model's counting scores per sentence, beside the human scores
            counts = bws_counts(records)
            tasks[name] = TaskSamples(name, counts["ids"], counts["model"], counts["gold"])
            bws[name] = records
            continue
        if len(set(ids)) != len(ids):
            raise InputError(sample_file, "a sentence id is logged twice", field="doc.id")
        order = np.argsort(ids, kind="stable")
        tasks[name] = TaskSamples(name, np.asarray(ids, dtype=np.int64)[order], np.asarray(preds)[order], np.asarray(golds)[order])
    groups = {g: list(subs) for g, subs in results.get("group_subtasks", {}).items() if subs}
    return Run(p, results, tasks, groups, docs, bws)


def load_runs(paths: list[str | Path] | str | Path) -> list[Run]:
    """Every run under the given paths: each results file, or the newest results file of every folder
    below a given folder (so `results/main`, with one run per task, gives them all)."""
    items = [paths] if isinstance(paths, (str, Path)) else paths
    return [load_run(f) for p in items for f in _results_files(Path(p))]
