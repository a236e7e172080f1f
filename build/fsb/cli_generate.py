"""CLI subcommands of the generation stage (`fsb seeds`, `fsb generate`, `fsb explain`).

Kept apart from cli.py so the generation stage owns its command line: `commands` (the `_commands.Commands`
registry) holds the three subcommands, each with its arguments function; cli.py installs it. The
handlers print; the work is done by `fsb.engine`, `fsb.generate`, `fsb.explain` and `fsb.seeds`.
Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from fifty_shades_of_bias import PROMPT_TYPES, SEED_TYPES

from ._argtypes import nonneg_int, pos_float, pos_int, seed
from ._commands import Commands
from .seeds import DEFAULT_COUNTS  # stdlib-only module: cheap to import

commands = Commands()


def _formats(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in PROMPT_TYPES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown format {', '.join(map(repr, bad)) or repr(text)}; choose from {', '.join(PROMPT_TYPES)}")
    return list(dict.fromkeys(names))


def _ic(text: str) -> tuple[str, str]:
    key, sep, path = text.partition("=")
    seed_type, _, fmt = key.rpartition(":")
    if not sep or not path or fmt not in PROMPT_TYPES or (seed_type and seed_type not in SEED_TYPES):
        kinds = f"formats: {', '.join(PROMPT_TYPES)}; seed types: {', '.join(SEED_TYPES)}"
        raise argparse.ArgumentTypeError(f"{text!r}: expected FORMAT=FILE or SEED_TYPE:FORMAT=FILE ({kinds})")
    return key, path


def _add_endpoint_options(p: argparse.ArgumentParser, max_tokens_help: str) -> None:
    g = p.add_argument_group("endpoint and sampling")
    g.add_argument("--model", required=True, help="model name as the endpoint knows it (recorded in every row)")
    g.add_argument(
        "--base-url",
        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, else OpenAI's). "
        "The key is read from $OPENAI_API_KEY only; a local server may need none",
    )
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0, as the release's script)")
    g.add_argument("--max-tokens", type=pos_int, help=max_tokens_help)
    g.add_argument("--top-p", type=float, help="nucleus sampling (default: the server's)")
    g.add_argument("--frequency-penalty", type=float, help="default: the server's")
    g.add_argument("--presence-penalty", type=float, help="default: the server's")
    g.add_argument("--api-seed", type=int, help="the request's `seed` field, for servers that honour it")
    g.add_argument("--stop", action="append", default=[], help="a stop sequence (repeatable)")
    r = p.add_argument_group("running")
    r.add_argument("--concurrency", type=pos_int, default=8, help="requests in flight at once (default 8)")
    r.add_argument("--retries", type=nonneg_int, default=5, help="retries per request on 429, 5xx, timeouts and bad answers (default 5)")
    r.add_argument("--timeout", type=pos_float, default=60.0, help="seconds an attempt may take, sending to last byte (default 60)")
    r.add_argument("--backoff", type=pos_float, default=1.0, help="first retry delay in seconds, doubled each retry up to 60 (default 1)")
    r.add_argument("--limit", type=nonneg_int, help="send at most this many unfinished requests in this run")
    r.add_argument("--dry-run", action="store_true", help="print the requests and a token estimate; send nothing, write nothing")
    r.add_argument("--no-progress", action="store_true", help="no progress bar (a summary line is still printed)")


def _sampling(args: argparse.Namespace) -> Any:
    from .engine import Sampling

    return Sampling(
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        top_p=args.top_p,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
        seed=args.api_seed,
        stop=tuple(args.stop),
    )


def _run_options(args: argparse.Namespace) -> Any:
    from .engine import RunOptions

    return RunOptions(concurrency=args.concurrency, retries=args.retries, timeout=args.timeout, backoff=args.backoff, limit=args.limit)


def _terminate_as_interrupt() -> None:
    """Make SIGTERM (kill, `timeout`, container stops) end a run like Ctrl-C: the outputs are written first."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


class _Bar:
    """The engine's progress as a tqdm bar with the rate, tokens, retries and failures."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.started = time.monotonic()

    def start(self, total: int, kind: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=kind, unit="req", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
        self.started = time.monotonic()

    def update(self, result: Any) -> None:
        if self.bar is None:
            return
        elapsed = max(1e-9, time.monotonic() - self.started)
        tokens = result.prompt_tokens + result.completion_tokens
        postfix = {"tok/s": f"{tokens / elapsed:.0f}", "tokens": tokens, "retries": result.retries, "failed": result.failed}
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _dry_run(plan: Any, out: str, limit: int | None) -> None:
    """Print the requests a run would send (all messages) and their cost; send and write nothing."""
    from .engine import estimate_cost, estimate_tokens, finished_ids, pending

    done = finished_ids(plan, out)
    todo = pending(plan, done, limit)
    for r in todo:
        label = " ".join(f"{k}={r.fields[k]}" for k in ("seed_type", "prompt_type") if k in r.fields)
        print(f"### uid {r.uid} {label} request {r.request_id[:16]} (~{estimate_tokens(r.body['messages'])} prompt tokens)")
        for m in r.body["messages"]:
            print(f"[{m['role']}] {m['content']}")
        print()
    cost = estimate_cost(todo)
    print(
        f"dry run: {cost.requests} requests to send ({len(done)} of {len(plan.requests)} already finished); "
        f"about {cost.prompt_tokens} prompt tokens (~4 characters a token) and at most {cost.max_completion_tokens} completion tokens. "
        "Nothing was sent."
    )


def _report(result: Any, out: str) -> int:
    """What the run repaired, the one-line summary, where the files are; the exit code."""
    from .engine import journal_path

    journal = journal_path(out)
    if result.repaired_bytes:
        print(f"journal {journal}: cut off a torn last line ({result.repaired_bytes} bytes) left by an interrupted run", file=sys.stderr)
    if result.recovered:
        print(f"journal {journal}: had lost {result.recovered} finished rows; took them back from {out}", file=sys.stderr)
    if result.fatal:
        print(f"stopped: {result.fatal}", file=sys.stderr)
    print(result.summary_line(), file=sys.stderr)
    outs = result.outputs
    if outs.get("out"):
        print(f"wrote {outs['rows']} rows -> {outs['out']}", file=sys.stderr)
    if outs.get("failures_file"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "from earlier runs"
        where = outs["failures_file"]
        print(f"{outs['failures']} requests failed ({kinds}); reasons in {where}; rerun the same command to retry them", file=sys.stderr)
    return int(result.exit_code)


def _run(args: argparse.Namespace, plan: Any, endpoint: Any, side_outputs: list[Any]) -> int:
    from . import engine

    _terminate_as_interrupt()
    progress = None if args.no_progress else _Bar()
    result = engine.run(plan, args.out, endpoint, _run_options(args), side_outputs=side_outputs, progress=progress)
    return _report(result, args.out)


SEEDS_LINE = r'\{"seed": .*'  # the first line of a seeds file `fsb seeds` wrote


def _output_file(path: str, pattern: str, kind: str, *, force: bool) -> None:
    """Refuse, before any request, an output path that is a folder or an existing file this command did not write."""
    from ._io import check_replaceable_file, first_line_matches

    check_replaceable_file(path, replace_if=None if force else first_line_matches(pattern), kind=kind, hint=", or pass --force")


# --- arguments ---------------------------------------------------------------------------------------------


def _seeds_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--out", required=True, help="output JSON lines, one seed a line (a .manifest.json is written beside it)")
    s.add_argument("--force", action="store_true", help="replace --out even if it is not an earlier output of fsb seeds")
    s.add_argument("--copa", help="COPA premises: the XML corpus (e.g. balacopa-dev-all.xml) or JSON lines with 'premise'")
    s.add_argument("--stereoset", help="StereoSet: the original dev.json, or a list of items such as EditBias's gender_test.json")
    for seed_type in SEED_TYPES:
        s.add_argument(
            f"--{seed_type}",
            type=nonneg_int,
            default=DEFAULT_COUNTS[seed_type],
            help=f"{seed_type} seeds (default {DEFAULT_COUNTS[seed_type]})",
        )
    s.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    s.add_argument("--gendered-words", help="your own gendered word list (default: the project's wordlists/gendered_words.txt)")
    s.add_argument("--person-words", help="your own person word list (default: the project's wordlists/person_words.txt)")
    s.add_argument("--mark", nargs="+", metavar="SEEDS", help="mark these seed files (FILE, TYPE=FILE or a folder) instead of drawing")


def _generate_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--seeds",
        action="append",
        required=True,
        metavar="SEEDS",
        help="a seed file: `fsb seeds` JSONL, TYPE=FILE.txt, or a folder (repeatable)",
    )
    g.add_argument("--out", required=True, help="output .jsonl; the journal and failures files go beside it")
    g.add_argument(
        "--formats", type=_formats, default=["conversion", "completion"], help="comma-separated formats (default: conversion,completion)"
    )
    g.add_argument("--ic-dir", help="folder with the release's in-context files (default: the local release copy)")
    g.add_argument(
        "--ic", type=_ic, action="append", default=[], metavar="[SEED_TYPE:]FORMAT=FILE", help="your own in-context examples (repeatable)"
    )
    g.add_argument("--shots", type=nonneg_int, default=2, help="in-context examples per request (default 2, as the release)")
    g.add_argument("--seed", type=seed, default=0, help="seed for choosing in-context examples (default 0)")
    g.add_argument(
        "--first-uid",
        type=nonneg_int,
        default=1,
        help="the first generation's uid (default 1); a later round starts past the earlier rounds' uids, e.g. 1001",
    )
    g.add_argument("--csv", help="also write the release's FSB_text.csv columns (uid,prompt_type,seed_type,query,response) here")
    g.add_argument("--batch-file", help="write the unfinished requests as OpenAI Batch API input instead of sending them")
    g.add_argument("--collect", metavar="FILE", help="merge an OpenAI Batch API output file into OUT instead of sending requests")
    g.add_argument("--force", action="store_true", help="replace --csv / --batch-file even if they are not earlier outputs of fsb generate")
    _add_endpoint_options(g, "completion tokens per request (default 100; 512 for conversation)")


def _explain_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--out", required=True, help="output .jsonl (uid, text, score, bin, reason and provenance)")
    e.add_argument("--dataset", help="a built dataset folder or Hub id (default: the last `fsb build`); its human scores are explained")
    e.add_argument("--generations", help="sentences: the release's FSB_text.csv or `fsb generate` output (with --scores)")
    e.add_argument("--scores", help="CSV with id (or uid/item) and a score in [0, 1], e.g. a model's scores (with --generations)")
    e.add_argument("--score-column", help="the score column (default: score_normalized if present, else score)")
    e.add_argument("--per-bin", type=nonneg_int, default=10, help="sentences per bin (default 10)")
    e.add_argument(
        "--bins", choices=("analysis", "equispaced"), default="analysis", help="the paper's 3 analysis bins or 4 equispaced bins"
    )
    e.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    _add_endpoint_options(e, "completion tokens per request (default 200)")


# --- fsb seeds --------------------------------------------------------------------------------------


@commands.add(
    "seeds",
    arguments=_seeds_arguments,
    help="curate seed lists (explicit from StereoSet, implicit/neutral/random from COPA) with provenance",
    description="Draw seeds reproducibly from source files, marking each with the gendered and person word lists. "
    "Or, with --mark, mark existing seed files (e.g. the release's seeds/ folder) and write them in the same format.",
)
def _seeds(args: argparse.Namespace) -> int:
    from .marks import Marker, load_wordlist
    from .seeds import Seed, curate, read_seeds, summarize, write_seeds

    _output_file(args.out, SEEDS_LINE, "a seeds file from `fsb seeds`", force=args.force)
    marker = Marker(
        load_wordlist(args.gendered_words, name="gendered") if args.gendered_words else None,
        load_wordlist(args.person_words, name="person") if args.person_words else None,
    )
    if args.mark:
        chosen, notes = read_seeds(args.mark)
        for note in notes:
            print(note, file=sys.stderr)
        marked = []
        for s in chosen:
            extra = {**s.extra, **marker.mark(s.text).fields()}
            marked.append(Seed(s.text, s.seed_type, s.source, s.source_id, s.occurrence, extra))
        write_seeds(args.out, marked)
        manifest_path = None
    else:
        counts = {t: getattr(args, t) for t in SEED_TYPES}
        marked, manifest = curate(args.copa, args.stereoset, counts, seed=args.seed, marker=marker)
        manifest_path = write_seeds(args.out, marked, manifest)
    print(f"wrote {len(marked)} seeds -> {args.out}" + (f" (manifest {manifest_path})" if manifest_path else ""))
    print(f"  {'type':10s} {'seeds':>6s} {'gendered':>9s} {'person':>7s}")
    for seed_type, row in summarize(marked, marker).items():
        print(f"  {seed_type:10s} {row['seeds']:6d} {row['gendered']:9d} {row['person']:7d}")
    return 0


# --- fsb generate -----------------------------------------------------------------------------------------


@commands.add(
    "generate",
    arguments=_generate_arguments,
    help="turn seeds into gender-biased generations through an OpenAI-compatible endpoint (resumable)",
    description="One request per seed and format, sent with bounded concurrency and retries. Every finished "
    "generation is fsync'd to OUT's journal, so a run can be killed at any moment and rerun with the same "
    "command: it sends only what is not finished. OUT (JSON lines) feeds `fsb build --generations` directly.",
)
def _generate(args: argparse.Namespace) -> int:
    from . import engine
    from .generate import build_generation_plan, release_csv
    from .prompts import load_prompt_set
    from .raw import GENERATION_COLUMNS
    from .release import find_local_release
    from .seeds import read_seeds

    modes = [m for m in ("dry_run", "batch_file", "collect") if getattr(args, m)]
    if len(modes) > 1:
        got = ", ".join("--" + m.replace("_", "-") for m in modes)
        raise engine.EngineError(f"choose one of --dry-run, --batch-file and --collect (got {got})")
    endpoint = None
    if not (args.dry_run or args.batch_file or args.collect):
        endpoint = engine.resolve_endpoint(args.base_url)  # before any file work: a missing key is the first thing to know
    seeds, notes = read_seeds(args.seeds)
    for note in notes:
        print(note, file=sys.stderr)
    ic_dir = args.ic_dir or find_local_release()
    prompts = load_prompt_set(
        ic_dir, dict(args.ic), formats=args.formats, seed_types=sorted({s.seed_type for s in seeds}), shots=args.shots, seed=args.seed
    )
    try:
        plan = build_generation_plan(seeds, prompts, args.formats, args.model, _sampling(args), first_uid=args.first_uid)
    except ValueError as e:
        raise engine.EngineError(str(e)) from None
    if args.csv:
        _output_file(args.csv, ",".join(GENERATION_COLUMNS), "a generations CSV from `fsb generate --csv`", force=args.force)
    if args.batch_file:
        _output_file(args.batch_file, engine.BATCH_LINE, "a Batch API input file from `fsb generate --batch-file`", force=args.force)
    side_outputs = [(args.csv, release_csv)] if args.csv else []
    if args.dry_run:
        _dry_run(plan, args.out, args.limit)
        return 0
    if args.batch_file:
        written = engine.write_batch(plan, args.out, args.batch_file, args.limit, force=args.force)
        where = ", ".join(str(p) for p, _ in written) or "(nothing left to send)"
        n = sum(count for _, count in written)
        print(f"wrote {n} requests for the Batch API -> {where}; merge its output with --collect FILE and the same arguments")
        return 0
    if args.collect:
        key = os.environ.get("OPENAI_API_KEY") or None  # only to scrub it, should a batch output quote it
        result = engine.collect_batch(plan, args.out, args.collect, side_outputs=side_outputs, base_url=args.base_url, api_key=key)
        return _report(result, args.out)
    print(f"plan: {len(plan.requests)} requests ({len(seeds)} seeds x {', '.join(args.formats)}) -> {args.out}", file=sys.stderr)
    return _run(args, plan, endpoint, side_outputs)


# --- fsb explain ------------------------------------------------------------------------------------------


@commands.add(
    "explain",
    arguments=_explain_arguments,
    help="ask a model the reason behind scores (the paper's appendix A.4 prompt) for a stratified sample per bin",
    description="Sample sentences per score bin and ask the model, told the score, why; resumable like `fsb generate`.",
)
def _explain(args: argparse.Namespace) -> int:
    from . import engine
    from .explain import build_explain_plan, load_items, sample_by_bin

    endpoint = None if args.dry_run else engine.resolve_endpoint(args.base_url)
    items = load_items(dataset=args.dataset, generations=args.generations, scores=args.scores, score_column=args.score_column)
    sample = sample_by_bin(items, args.per_bin, seed=args.seed, scheme=args.bins)
    plan = build_explain_plan(sample, args.model, _sampling(args), seed=args.seed, scheme=args.bins)
    counts = plan.summary["per_bin"]
    print(f"sample: {len(sample)} sentences ({', '.join(f'{k} {v}' for k, v in counts.items())}) -> {args.out}", file=sys.stderr)
    if args.dry_run:
        _dry_run(plan, args.out, args.limit)
        return 0
    return _run(args, plan, endpoint, [])


def add_commands(sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """The old entry point, kept for callers not yet converted."""
    commands.install(sub, handlers)
