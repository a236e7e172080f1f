"""A language model as a best-worst annotator: the judged tuples of a dataset, each shown in fixed
rotations, sent as chat requests through the request engine (`fsb annotate llm`), and the answers
written as judgments in the human files' format (`Item1..Item4,BestItem,WorstItem,Annotator`), so that
`fsb score`, `fsb reliability` and `fsb build` read them like any annotator's.

The prompt, the rotations, the tuple samples and the strict answer parser are the lm-eval task's
(`fsb_bws`; fsb.annotate.bwsprompt, which the harness also reads), so the two ways of running the protocol cannot drift apart.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fsb.annotate.bwsprompt import bws_prompt, load_bws, parse_bws, rotate
from fsb.engine import Request, RequestPlan, Sampling, request_id

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "JUDGMENTS_COLUMNS",
    "JUDGMENTS_LINE",
    "Judgments",
    "build_bws_plan",
    "judgments_csv",
    "parse_rows",
    "select_tuples",
]

JUDGMENTS_COLUMNS = ("Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator")
JUDGMENTS_LINE = ",".join(JUDGMENTS_COLUMNS)  # the first line of a judgments file this module wrote
DEFAULT_MAX_TOKENS = 16  # "Most: 1\nLeast: 4" is about 8 tokens


def select_tuples(
    dataset: str | None = None,
    *,
    sample: int | None = None,
    per_bin: int | None = None,
    seed: int = 0,
    rotations: str | Sequence[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The judged tuples to present (all, a simple random sample of `sample` tuples, or `per_bin` per
    equispaced bin of the tuple's mean human score), each with its rotations; and where they came from."""
    loaded = load_bws(fsb_dataset=dataset, fsb_sample=sample, fsb_per_bin=per_bin, fsb_sample_seed=seed, fsb_bws_rotations=rotations)
    return list(loaded["test"]), loaded.fsb_source


def build_bws_plan(
    docs: Sequence[Mapping[str, Any]], model: str, sampling: Sampling, source: Mapping[str, Any] | None = None
) -> RequestPlan:
    """One chat request per tuple and rotation, numbered in tuple order: the task's prompt as the user
    message; each request's row carries the tuple id, the shift and the items in the order shown."""
    requests = []
    for doc in docs:
        for shift in doc["rotations"]:
            messages = [{"role": "user", "content": bws_prompt({**doc, "shift": shift}).rstrip()}]
            body = {"model": model, "messages": messages, **sampling.params(DEFAULT_MAX_TOKENS)}
            fields = {"tuple_id": int(doc["tuple_id"]), "shift": int(shift), "items": [int(i) for i in rotate(doc["items"], int(shift))]}
            uid = len(requests)
            provenance = {"protocol": "fsb_bws", "dataset": dict(source or {})}
            requests.append(
                Request(uid, request_id(body, ["bws", fields["tuple_id"], fields["shift"]]), body, fields, provenance, one_line=False)
            )
    summary = {
        "kind": "annotate llm",
        "tuples": len(docs),
        "rotations": sorted({int(s) for d in docs for s in d["rotations"]}),
        "label_fields": ("tuple_id", "shift"),
    }
    return RequestPlan(requests, summary)


@dataclass(frozen=True)
class Judgments:
    """The parsed answers as judgment rows (items in the order shown) and how many did not parse."""

    rows: list[tuple[int, int, int, int, int, int, str]]
    unparsed: int


def parse_rows(rows: Sequence[Mapping[str, Any]], annotator: str | None = None) -> Judgments:
    """Judgment rows from the engine's finished rows: an answer that does not parse ("Most: N\\nLeast: M",
    N != M in 1..4) is counted, never turned into a judgment."""
    out, bad = [], 0
    for row in rows:
        pick = parse_bws(str(row.get("response", "")))
        if pick is None:
            bad += 1
            continue
        items = [int(i) for i in row["items"]]
        who = annotator or str(row.get("model", "model"))
        out.append((*items, items[pick[0] - 1], items[pick[1] - 1], who))  # type: ignore[arg-type]
    return Judgments(out, bad)  # type: ignore[arg-type]


def judgments_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The judgments file (`Item1..Item4,BestItem,WorstItem,Annotator`) of the engine's finished rows;
    the annotator is the model name each row records."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(JUDGMENTS_COLUMNS)
    w.writerows(parse_rows(rows).rows)
    return buf.getvalue()
