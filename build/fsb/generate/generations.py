"""Seeds -> generations: the generation stage's plan and files, sent through the request engine (`fsb.engine`).

The plan has one request per (seed, format), numbered by uid in the release's order (seed type, then
format, then seed order); each request's place is (seed type, format, occurrence), so the release's
repeated seed gets its own request. Sentence formats keep the first line of each answer (as the
release did), a conversation the whole answer. Output rows start with the release's columns (uid,
prompt_type, seed_type, query, response), so `fsb build --generations` reads them as they are, and
`release_csv` writes the release's FSB_text.csv layout from them, losslessly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import fifty_shades_of_bias as spec
from fsb.engine import Request, RequestPlan, Sampling, canonical_json, request_id
from fsb.generate.prompts import TEMPLATE_VERSION, PromptSet
from fsb.generate.seeds import Seed

__all__ = ["FORMAT_MAX_TOKENS", "build_generation_plan", "release_csv"]

# Completion tokens per request by format: a sentence wants one line (the release kept the first line), a conversation is long.
FORMAT_MAX_TOKENS = {"conversion": 100, "completion": 100, "conversation": 512}


def build_generation_plan(
    seeds: Sequence[Seed],
    prompts: PromptSet,
    formats: Sequence[str],
    model: str,
    sampling: Sampling,
    first_uid: int = 1,
) -> RequestPlan:
    """One request per seed and format; uids run first_uid, first_uid + 1, ... by seed type, then format, then
    seed order (the release's layout). A later round starts past the earlier rounds' uids (e.g. 1001)."""
    unknown = [f for f in formats if f not in spec.PROMPT_TYPES]
    if unknown or not formats:
        raise ValueError(f"unknown formats {unknown}; expected some of {', '.join(spec.PROMPT_TYPES)}")
    requests: list[Request] = []
    seeds_hash = hashlib.sha256()
    counts: dict[str, int] = {}
    for seed_type in spec.SEED_TYPES:
        group = [s for s in seeds if s.seed_type == seed_type]
        counts[seed_type] = len(group)
        for s in group:
            seeds_hash.update(canonical_json([s.seed_type, s.text, s.occurrence]))
        for fmt in spec.PROMPT_TYPES:
            if fmt not in formats:
                continue
            for s in group:
                messages, shown = prompts.messages(s.text, seed_type, fmt, s.occurrence)
                body = {"model": model, "messages": messages, **sampling.params(FORMAT_MAX_TOKENS[fmt])}
                rid = request_id(body, ["generate", seed_type, fmt, s.occurrence])
                uid = first_uid + len(requests)
                fields = {"uid": uid, "seed_type": seed_type, "prompt_type": fmt, "query": s.text, "seed": s.text}
                provenance = {"seed_source": s.provenance(), "ic_examples": shown, "template_version": TEMPLATE_VERSION}
                requests.append(Request(uid, rid, body, fields, provenance, "response", one_line=fmt != "conversation"))
    if requests and requests[-1].uid > 2**31 - 1:
        raise ValueError(f"uids {first_uid}..{requests[-1].uid} pass 2**31 - 1, the largest uid a dataset stores (int32)")
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):  # read_seeds refuses duplicates, so this is a bug, not bad input
        raise AssertionError("two planned requests share an id")
    summary = {
        "kind": "generate",
        "model": model,
        "formats": [f for f in spec.PROMPT_TYPES if f in formats],
        "seeds": counts,
        "seeds_sha256": seeds_hash.hexdigest(),
        "sampling": {**sampling.params(0), "max_tokens": sampling.max_tokens or {f: FORMAT_MAX_TOKENS[f] for f in formats}},
        "shots": prompts.shots,
        "ic_seed": prompts.seed,
        "ic_files": prompts.describe(),
        "template_version": TEMPLATE_VERSION,
        "requests": len(requests),
        "first_uid": first_uid,
    }
    return RequestPlan(requests, summary)


def _csv_field(value: object) -> str:
    text = str(value)
    # The csv module leaves a lone carriage return unquoted when lines end in "\n"; readers then split there.
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def release_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """The release's FSB_text.csv columns (uid, prompt_type, seed_type, query, response) from output rows, losslessly."""
    from fsb.tables.csvrows import GENERATION_COLUMNS

    lines = [",".join(GENERATION_COLUMNS)]
    for r in rows:
        lines.append(",".join(_csv_field(r[k]) for k in GENERATION_COLUMNS))
    return "\n".join(lines) + "\n"
