"""The paper's prompts: the three generation instructions (appendix A.1) with their in-context examples,
and the reasoning prompt (appendix A.4) that asks a model why a sentence got its score.

A generation request is a chat: the format's instruction as the system message, then `shots` in-context
examples as user/assistant turns (seed, generation), then the seed as the last user turn; this is how
the release's generation script assembled them (it drew 2 examples, unseeded, possibly the same one
twice). Here the examples are drawn without replacement by a reproducible rank keyed on the seed, and
an example whose seed is the seed being converted is never shown (it would hand the model an answer).

In-context files: the release's `{seed_type}_{format}_ic.json` ({"task": ..., "ic": "<a Python-literal
list of (seed, generation) pairs>"}, parsed with ast.literal_eval, never eval), or a plain JSON list of
[seed, generation] pairs or {"seed": ..., "generation": ...} objects (bare, or as the "ic" field).
The release has no files for random seeds or the conversation format: random seeds draw from the
implicit and neutral files of the format together (all three kinds are COPA premises); the conversation
format uses the paper's instruction with no examples unless the user gives a file (`--ic conversation=FILE`).
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError, read_utf8, sha256_file
from fsb.generate.keys import normalize, rank_key

__all__ = [
    "INSTRUCTIONS",
    "REASONING_INSTRUCTION",
    "RELEASE_IC",
    "TEMPLATE_VERSION",
    "Examples",
    "PromptSet",
    "load_prompt_set",
    "read_examples",
    "reasoning_messages",
]

# Bumped whenever the way messages are assembled changes; stored with every generation.
TEMPLATE_VERSION = "fsb-prompts/1"

# Appendix A.1, word for word (capitals and all).
INSTRUCTIONS: dict[str, str] = {
    "conversion": (
        "You convert any given statement into one statement that is biased against a gender. Follow the examples specified below:"
    ),
    "completion": (
        "Using the given statement as a start, You generate only one gender-biased sentence to complete the provided seed. "
        "Some examples that you can follow are:"
    ),
    "conversation": (
        "Using the given statement as a start, You generate a long gender-biased conversation between 2 people "
        "like the conversations given as examples here:"
    ),
}
# Appendix A.4: the model is told the score it gave and asked for the reason.
REASONING_INSTRUCTION = (
    "On a fine-grained real-valued scale of 0 to 1, you gave the following sentence a rating of the degree of gender bias. "
    "Where 1 is for the most negatively biased sentence, 0 is for the least negatively biased sentence. Give a reason for your score."
)

# The release's in-context files, by (seed type, format), relative to the release folder.
RELEASE_IC: dict[tuple[str, str], str] = {
    (seed_type, fmt): f"in_context_examples/{seed_type}_{fmt}_ic.json"
    for seed_type in ("explicit", "implicit", "neutral")
    for fmt in ("conversion", "completion")
}
# Random seeds are COPA premises of any kind: they draw from these types' files of the same format.
RANDOM_POOL = ("implicit", "neutral")
_MAX_IC_BYTES = 10_000_000


@dataclass(frozen=True)
class Examples:
    """Validated in-context examples from one file: (seed, generation) pairs, the file's name and sha256."""

    pairs: tuple[tuple[str, str], ...]
    path: str
    sha256: str
    task: str | None = None


def _pair(p: Path, i: int, item: Any) -> tuple[str, str]:
    where = f"ic[{i}]"
    if isinstance(item, Mapping):
        a, b = item.get("seed"), item.get("generation")
        if a is None and b is None:
            a, b = item.get("input"), item.get("output")
    elif isinstance(item, list | tuple) and len(item) == 2:
        a, b = item
    else:
        raise InputError(p, f"{where} is not a (seed, generation) pair: {_short(item)}", field="ic")
    if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
        raise InputError(p, f"{where} must hold two non-empty strings, got {_short(item)}", field="ic")
    return a, b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_examples(path: str | os.PathLike[str], expected_task: str | None = None) -> Examples:
    """Read and validate an in-context file; a `task` field must match the format it is used for."""
    p = Path(path)
    if p.is_file() and p.stat().st_size > _MAX_IC_BYTES:
        raise InputError(p, f"larger than {_MAX_IC_BYTES} bytes; an in-context file holds a few examples")
    try:
        doc = json.loads(read_utf8(p))
    except json.JSONDecodeError as e:
        raise InputError(p, f"not valid JSON: {e.msg}", line=e.lineno) from None
    task = None
    ic: Any = doc
    if isinstance(doc, dict):
        if "ic" not in doc:
            raise InputError(p, "expected a list of (seed, generation) pairs, or an object with an 'ic' field", field="ic")
        task = doc.get("task")
        if task is not None and task not in spec.PROMPT_TYPES:
            raise InputError(p, f"unknown task {task!r}; expected one of {', '.join(spec.PROMPT_TYPES)}", field="task")
        if expected_task is not None and task is not None and task != expected_task:
            raise InputError(p, f"is a {task} file, but it was given for the {expected_task} format", field="task")
        ic = doc["ic"]
        if isinstance(ic, str):
            try:  # a Python literal, as the release writes it: literals only, nothing is ever run
                ic = ast.literal_eval(ic.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
                raise InputError(p, f"the 'ic' string is not a Python literal list of pairs ({type(e).__name__})", field="ic") from None
    if not isinstance(ic, list | tuple):
        raise InputError(p, f"expected a list of (seed, generation) pairs, got {type(ic).__name__}", field="ic")
    if not ic:
        raise InputError(p, "the list of in-context examples is empty", field="ic")
    pairs = tuple(_pair(p, i, item) for i, item in enumerate(ic))
    return Examples(pairs, str(p), sha256_file(p), task)


@dataclass(frozen=True)
class PromptSet:
    """The example pools for every (seed type, format): each a list of files (the pool is their union)."""

    pools: dict[tuple[str, str], tuple[Examples, ...]]
    shots: int = 2
    seed: int = 0

    def examples_for(self, seed_type: str, fmt: str) -> tuple[Examples, ...]:
        """The files whose examples a (seed type, format) request draws from; empty: the instruction alone."""
        return self.pools.get((seed_type, fmt), ())

    def messages(self, seed: str, seed_type: str, fmt: str, occurrence: int = 0) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
        """The chat for one seed and format, and which examples it shows (file, sha256, index)."""
        if fmt not in INSTRUCTIONS:
            raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(INSTRUCTIONS)}")
        candidates = []
        own = normalize(seed)
        for ex in self.examples_for(seed_type, fmt):
            for i, (a, b) in enumerate(ex.pairs):
                if normalize(a) != own:
                    candidates.append((rank_key(self.seed, seed_type, fmt, seed, occurrence, ex.sha256, i), ex, i, a, b))
        candidates.sort(key=lambda c: c[0])
        chosen = candidates[: self.shots]
        messages = [{"role": "system", "content": INSTRUCTIONS[fmt]}]
        shown = []
        for _, ex, i, a, b in chosen:
            messages.append({"role": "user", "content": a})
            messages.append({"role": "assistant", "content": b})
            shown.append({"file": Path(ex.path).name, "sha256": ex.sha256, "index": i})
        messages.append({"role": "user", "content": seed})
        return messages, shown

    def describe(self) -> dict[str, list[dict[str, str]]]:
        """Which files feed each pool (name and sha256), for the run's provenance."""
        return {
            f"{st}/{fmt}": [{"file": Path(ex.path).name, "sha256": ex.sha256} for ex in pool]
            for (st, fmt), pool in sorted(self.pools.items())
        }


def _parse_key(key: str) -> tuple[str | None, str]:
    seed_type, sep, fmt = key.rpartition(":")
    if fmt not in spec.PROMPT_TYPES or (sep and seed_type not in spec.SEED_TYPES):
        raise ValueError(
            f"--ic {key!r}: expected FORMAT=FILE or SEED_TYPE:FORMAT=FILE (formats {', '.join(spec.PROMPT_TYPES)}; "
            f"seed types {', '.join(spec.SEED_TYPES)})"
        )
    return (seed_type or None), fmt


def load_prompt_set(
    ic_dir: str | os.PathLike[str] | None,
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    *,
    formats: Sequence[str] = ("conversion", "completion"),
    seed_types: Sequence[str] = spec.SEED_TYPES,
    shots: int = 2,
    seed: int = 0,
) -> PromptSet:
    """Assemble the example pools: the release's files from `ic_dir`, replaced by `overrides`.

    `overrides` maps "FORMAT" (every seed type) or "SEED_TYPE:FORMAT" to a file; the more specific wins.
    A release file that is needed but missing from `ic_dir` is an error naming it.
    """
    if shots < 0:
        raise ValueError("shots must be >= 0")
    per_format: dict[str, Path] = {}
    per_key: dict[tuple[str, str], Path] = {}
    for key, path in (overrides or {}).items():
        seed_type, fmt = _parse_key(key)
        if seed_type is None:
            per_format[fmt] = Path(path)
        else:
            per_key[(seed_type, fmt)] = Path(path)
    cache: dict[Path, Examples] = {}

    def load(path: Path, fmt: str) -> Examples:
        if path not in cache:
            cache[path] = read_examples(path, expected_task=fmt)
        elif cache[path].task not in (None, fmt):
            raise InputError(path, f"is a {cache[path].task} file, but it was given for the {fmt} format", field="task")
        return cache[path]

    def release_file(seed_type: str, fmt: str) -> Path:
        rel = RELEASE_IC[(seed_type, fmt)]
        if ic_dir is None:
            raise InputError(rel, "no local copy of the release was found: run `fsb fetch-release`, or give --ic-dir DIR or --ic")
        root = Path(ic_dir)
        path = root / rel if (root / rel).is_file() else root / Path(rel).name
        if not path.is_file():
            raise InputError(path, f"missing: the {seed_type} {fmt} in-context examples (give --ic {seed_type}:{fmt}=FILE)")
        return path

    pools: dict[tuple[str, str], tuple[Examples, ...]] = {}
    for fmt in formats:
        for seed_type in seed_types:
            if (seed_type, fmt) in per_key:
                files = [per_key[(seed_type, fmt)]]
            elif fmt in per_format:
                files = [per_format[fmt]]
            elif fmt == "conversation" or shots == 0:
                files = []  # the release has no conversation examples: the instruction alone
            elif seed_type == "random":
                files = [per_key.get((t, fmt)) or release_file(t, fmt) for t in RANDOM_POOL]
            else:
                files = [release_file(seed_type, fmt)]
            pools[(seed_type, fmt)] = tuple(load(f, fmt) for f in files)
    return PromptSet(pools, shots=shots, seed=seed)


def reasoning_messages(text: str, score: str) -> list[dict[str, str]]:
    """The appendix A.4 chat: the instruction, then the sentence and the score the model is told it gave."""
    return [{"role": "system", "content": REASONING_INSTRUCTION}, {"role": "user", "content": f"Text: {text} Score: {score}"}]
