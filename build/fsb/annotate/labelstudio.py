"""Label Studio, the annotation tool research groups run best-worst scaling in: the labeling config and the
tasks of a project for a tuple design, and the reading of Label Studio's JSON export back into judgments.

One task per tuple. Its data hold `tuple_id`, `item1..itemK` (ids, in the order shown) and `text1..textK`;
the config shows the K texts numbered 1..K and asks for two single choices, `best` (most biased) and
`worst` (least biased), each answered with a position 1..K. Positions map back to ids through the task's
own data, so the export alone is enough to rebuild every judgment.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from fsb.core.readers import InputError, quoted, read_utf8
from fsb.tables.csvrows import INT64_MAX, id_problem

__all__ = ["CONFIG_FILE", "TASKS_FILE", "Export", "LsJudgment", "labeling_config", "read_export", "tasks_json"]

CONFIG_FILE = "labeling_config.xml"
TASKS_FILE = "tasks.json"
BEST, WORST = "best", "worst"
QUESTION = "Which text is the MOST gender-biased, and which the LEAST?"


def labeling_config(k: int, question: str = QUESTION) -> str:
    """A Label Studio labeling config for one best-worst tuple of k texts: the texts numbered 1..k, and two
    required single choices of a number, `best` (most biased) and `worst` (least biased)."""
    choices = "".join(f'<Choice value="{j}"/>' for j in range(1, k + 1))
    texts = "\n".join(f'  <View><Header value="{j}" size="5"/><Text name="text{j}" value="$text{j}"/></View>' for j in range(1, k + 1))
    return (
        "<View>\n"
        f"  <Header value={quoteattr(question)}/>\n"
        f"{texts}\n"
        '  <Header value="Most biased" size="5"/>\n'
        f'  <Choices name="{BEST}" toName="text1" choice="single" showInline="true" required="true">{choices}</Choices>\n'
        '  <Header value="Least biased" size="5"/>\n'
        f'  <Choices name="{WORST}" toName="text1" choice="single" showInline="true" required="true">{choices}</Choices>\n'
        "</View>\n"
    )


def tasks_json(tuple_ids: list[int], items: list[list[Any]], texts: list[list[str]]) -> str:
    """Label Studio tasks (a JSON list of {"data": {...}}), one per tuple, items and texts in shown order."""
    tasks = []
    for tid, row, words in zip(tuple_ids, items, texts):
        data: dict[str, Any] = {"tuple_id": int(tid)}
        data.update({f"item{j + 1}": v for j, v in enumerate(row)})
        data.update({f"text{j + 1}": t for j, t in enumerate(words)})
        tasks.append({"data": data})
    return json.dumps(tasks, ensure_ascii=False, indent=1) + "\n"


@dataclass(frozen=True)
class LsJudgment:
    """One submitted annotation: its task and tuple, the items as shown, the chosen ids, who and when."""

    task_id: int
    annotation_id: int
    tuple_id: int
    items: list[Any]
    best: Any
    worst: Any
    annotator: str
    timestamp: str


@dataclass(frozen=True)
class Export:
    tasks: int
    cancelled: int
    tuple_size: int
    judgments: list[LsJudgment]


def _annotator(value: Any) -> str:
    """The annotator's Label Studio user id. completed_by is the id, or (when expanded) {id, email, ...}:
    the id is kept, never the email, which would otherwise be published with the dataset."""
    if isinstance(value, dict):
        value = value.get("id")
    return "" if value is None else str(value)


def _choice(path: Path, where: str, result: list[Any], name: str, k: int) -> int:
    picks = []
    for r in result:
        if not isinstance(r, dict) or r.get("from_name") != name:
            continue
        value = r.get("value")
        choices = value.get("choices") if isinstance(value, dict) else None
        if not isinstance(choices, list):
            raise InputError(path, f"{where}: {name!r} result has no list of choices (its value is {quoted(value)})")
        picks.append(choices)
    if not picks or not picks[0]:
        raise InputError(path, f"{where}: no {name!r} choice (was the project made with `fsb annotate export --format label-studio`?)")
    values = picks[0]
    if len(picks) > 1 or len(values) != 1:
        raise InputError(path, f"{where}: {name!r} must be one choice, got {[v for p in picks for v in (p or [])]}")
    text = str(values[0]).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= k:  # "²".isdigit() is True
        raise InputError(path, f"{where}: {name!r} choice {quoted(text)} is not a position 1..{k}")
    return int(text)


def _check_items(path: Path, task_id: int, items: list[Any]) -> None:
    """Each item of a task is an id (an integer or a non-empty string), and no id is repeated in the task."""
    for j, item in enumerate(items, start=1):
        if isinstance(item, bool) or not isinstance(item, (int, str)) or not str(item).strip():
            raise InputError(path, f"task {task_id}: item{j} is {quoted(item)}, not an item id (an integer or a non-empty string)")
    keys = [str(i).strip() for i in items]
    if len(set(keys)) < len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise InputError(path, f"task {task_id}: item {quoted(twice)} appears twice in one tuple")


def _annotation_name(ann: dict[str, Any], place: int) -> str:
    """How an error names an annotation: by its Label Studio id, or, when it has none (an export edited by
    hand or by a script), by its place in the task's list ("annotation #2 without an id")."""
    ident = ann.get("id")
    if ident is None or isinstance(ident, (dict, list)):
        return f"annotation #{place} without an id"
    return f"annotation {quoted(ident)}" if isinstance(ident, str) else f"annotation {ident}"


def _earlier(first: tuple[int, str], task_id: int) -> str:
    """The earlier annotation of a repeated judgment: by name in the same task, else with its task."""
    return first[1] if first[0] == task_id else f"task {first[0]}, {first[1]}"


def read_export(path: str | os.PathLike[str]) -> Export:
    """Judgments from Label Studio's JSON export (a list of tasks with their annotations), validated: every
    task carries tuple_id and item1..itemK, every kept annotation one best and one worst position, best
    differs from worst, and no annotator judged a tuple twice. Errors name the task and annotation ids."""
    p = Path(path)
    try:
        data = json.loads(read_utf8(p))
    except json.JSONDecodeError as e:
        raise InputError(p, f"not valid JSON: {e.msg}", line=e.lineno) from None
    except RecursionError:  # json's parser recurses once per level of [ or {
        raise InputError(p, "not valid JSON: nested too deeply") from None
    if not isinstance(data, list):
        raise InputError(p, "expected Label Studio's JSON export: a list of tasks")
    judgments: list[LsJudgment] = []
    cancelled = 0
    k_seen: int | None = None
    seen: dict[tuple[str, int], tuple[int, str]] = {}
    for n, task in enumerate(data):
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise InputError(p, f"task #{n + 1}: not a Label Studio task (no 'data' object)")
        task_id = task.get("id", n + 1)
        if isinstance(task_id, bool) or not isinstance(task_id, int):
            raise InputError(p, f"task #{n + 1}: its id {quoted(task_id)} is not an integer (Label Studio numbers its tasks)")
        d = task["data"]
        k = 0
        while f"item{k + 1}" in d:
            k += 1
        if k < 2 or "tuple_id" not in d:
            raise InputError(p, f"task {task_id}: its data lack tuple_id and item1..itemK (was it exported by fsb?)")
        if k_seen is not None and k != k_seen:
            raise InputError(p, f"task {task_id}: {k} items where earlier tasks have {k_seen}")
        k_seen = k
        if problem := id_problem(str(d["tuple_id"]).strip(), INT64_MAX):
            raise InputError(p, f"task {task_id}: tuple_id {d['tuple_id']!r}: {problem}")
        tuple_id = int(str(d["tuple_id"]).strip())
        items = [d[f"item{j + 1}"] for j in range(k)]
        _check_items(p, task_id, items)
        annotations = task.get("annotations")
        if annotations is None:
            annotations = []
        if not isinstance(annotations, list):
            raise InputError(p, f"task {task_id}: 'annotations' is {type(annotations).__name__}, expected a list of annotations")
        for m, ann in enumerate(annotations, start=1):
            if not isinstance(ann, dict):
                raise InputError(p, f"task {task_id}: an annotation is {quoted(ann)}, expected an object")
            name = _annotation_name(ann, m)
            where = f"task {task_id}, {name}"
            if ann.get("was_cancelled"):
                cancelled += 1
                continue
            result = ann.get("result") or []
            if not isinstance(result, list):
                raise InputError(p, f"{where}: 'result' is {type(result).__name__}, expected a list")
            best = _choice(p, where, result, BEST, k)
            worst = _choice(p, where, result, WORST, k)
            if best == worst:
                raise InputError(p, f"{where}: best and worst are the same text (position {best})")
            who = _annotator(ann.get("completed_by"))
            if who:
                if (who, tuple_id) in seen:
                    raise InputError(
                        p, f"{where}: annotator {quoted(who)} already judged tuple {tuple_id} ({_earlier(seen[(who, tuple_id)], task_id)})"
                    )
                seen[(who, tuple_id)] = (task_id, name)
            judgments.append(
                LsJudgment(
                    int(task_id), ann.get("id"), tuple_id, items, items[best - 1], items[worst - 1], who, str(ann.get("created_at") or "")
                )
            )
    if not judgments:
        raise InputError(p, f"no submitted annotations in {len(data)} tasks ({cancelled} cancelled)")
    return Export(len(data), cancelled, int(k_seen or 0), judgments)
