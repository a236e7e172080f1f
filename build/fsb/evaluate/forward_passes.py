"""Forward rows: what lm-eval's `hf` backend runs for a task, planned from its own grouping before the first
batch, then counted and timed as it runs. The main job prints its estimates from them (`TimedHFLM`), the
benchmark benchmarks/bench_main_job.py reports them, tests/evaluate/test_forward_passes.py counts them.

A row is one sequence of a batch that the model reads in one forward call. lm-eval 0.4.13's `HFLM` runs
log-likelihood requests through its `Collator` with `group_by="contexts"` (when `logits_cache`, its default):
requests whose context and continuation agree in all but the continuation's last token share one row, the
rows are sorted longest first and cut into batches of `batch_size`. So `fsb_ll`'s 11 answers " 0.0" .. " 1.0"
cost one row per distinct answer-without-its-last-token: with SmolLM2's tokenizer (" ", digit, ".", digit)
" 0.0" .. " 0.9" share the row "<prompt> 0." and " 1.0" has "<prompt> 1.", 2 rows a prompt, not 11
(`logits_cache=False` makes it 11). A generation is one row per prompt (its prompt's forward pass, then up to
`max_gen_toks` decoding steps), batched the same way.

The estimate is timed on the task's own first batch and extrapolated over the tokens still to run, counted as
the model reads them (each batch padded to its longest row): `elapsed + seconds per token of the first batch x
tokens left`, where `elapsed` holds what lm-eval did before (building the requests) and the first batch. Per
token, not per row: lm-eval sorts rows longest first, so the first batch's rows are the longest; a plan
without token counts falls back to rows.

In the main job lm-eval's own progress bars are hidden (`TimedHFLM(bars=False)`): their ETA, taken right after the
first batch of a longest-first order, overstated the time several-fold and glued itself to fsb's lines; the
clock prints its own progress instead (`Clock.every`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import Collator

__all__ = ["Clock", "Plan", "TimedHFLM", "generation_plan", "loglikelihood_plan"]


@dataclass(frozen=True)
class Plan:
    """What lm-eval will run for one request type: `requests` requests as `batches` (rows per batch, in order)."""

    kind: str  # "loglikelihood" or "generate_until"
    requests: int
    batches: tuple[int, ...]
    tokens: tuple[int, ...] = ()  # tokens each batch reads, padded to its longest row (a generation's prompt)

    @property
    def rows(self) -> int:
        """Forward rows: sequences the model reads (a generation's row also decodes its answer)."""
        return sum(self.batches)

    def describe(self) -> str:
        """The plan in words, e.g. "550 requests as 100 forward rows in 13 batches"."""
        what = "forward rows" if self.kind == "loglikelihood" else "generation rows (prompt, then decoding)"
        return f"{self.requests} requests as {self.rows} {what} in {len(self.batches)} batches"


def loglikelihood_plan(requests: Sequence[tuple[Any, list[int], list[int]]], batch_size: int, *, logits_cache: bool = True) -> Plan:
    """The batches `HFLM._loglikelihood_tokens` runs for tokenised requests, from lm-eval's own `Collator` with the
    backend's sort and group keys (requests sharing context + continuation[:-1] share a row when `logits_cache`).

    Parameters
    ----------
    requests : ((context, continuation), context tokens, continuation tokens), as HFLM.loglikelihood makes them.
    batch_size : rows per batch (0: one batch).
    logits_cache : the backend's `logits_cache` (and a causal model).

    Returns
    -------
    The plan.
    """

    def sort_key(req: tuple[Any, list[int], list[int]]) -> tuple[int, tuple[int, ...]]:
        toks = req[1] + req[2]
        return -len(toks), tuple(toks)

    order = Collator(
        list(requests),
        sort_fn=sort_key,
        group_by="contexts" if logits_cache else None,
        group_fn=lambda req: req[-2] + req[-1][:-1],
    )
    chunks = list(order.get_batched(n=batch_size))
    # a row reads context + continuation but its last token (HFLM: `(context_enc + continuation_enc)[:-1]`)
    tokens = tuple(len(chunk) * max(len(r[1]) + len(r[2]) - 1 for r in chunk) for chunk in chunks)
    return Plan("loglikelihood", len(requests), tuple(len(chunk) for chunk in chunks), tokens)


def generation_plan(args: Sequence[tuple[str, dict[str, Any]]], batch_size: int, length: Callable[[str], int] = len) -> Plan:
    """The batches `HFLM.generate_until` runs: one row per prompt, longest first, batched per distinct generation
    settings.

    Parameters
    ----------
    args : (context, generation kwargs) of each request; batch_size : rows per batch (0: one batch).
    length : a prompt's length in tokens (the backend's `tok_encode`, as its sort uses; default: characters).

    Returns
    -------
    The plan.
    """
    order = Collator(list(args), sort_fn=lambda a: (-length(a[0]), a[0]), group_by="gen_kwargs", group_fn=lambda a: a[1])
    chunks = list(order.get_batched(n=batch_size))
    tokens = tuple(len(chunk) * max(length(a[0]) for a in chunk) for chunk in chunks)
    return Plan("generate_until", len(args), tuple(len(chunk) for chunk in chunks), tokens)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


@dataclass
class Clock:
    """Per task: lm-eval's plans, each model call (rows, seconds), and the estimate made after the first batch.

    `start(task)` before the task; the model wrapper calls `planned` and `timed`. `echo` gets the plan line
    and the estimate line as they are known (None: silent), and with `every` (seconds) a progress line (rows run
    of rows planned, time so far) at most that often after the estimate."""

    echo: Callable[[str], None] | None = None
    every: float | None = None
    task: str = ""
    started: float = 0.0
    plans: list[Plan] = field(default_factory=list)
    calls: list[tuple[int, float]] = field(default_factory=list)
    estimate: float | None = None
    first: tuple[int, float] | None = None  # rows and seconds of the timed first batch
    said_at: float = 0.0  # when the last estimate or progress line was said

    def start(self, task: str) -> None:
        """A new task starts now: forget the last one's plans, calls and estimate."""
        self.task, self.started, self.plans, self.calls, self.estimate, self.first = task, time.monotonic(), [], [], None, None

    @property
    def rows(self) -> int:
        """Rows run so far in this task (counted at the model calls)."""
        return sum(r for r, _ in self.calls)

    def planned(self, plan: Plan) -> None:
        """lm-eval is about to run `plan`."""
        self.plans.append(plan)
        self._say(f"{self.task}: lm-eval runs {plan.describe()}")

    def timed(self, rows: int, seconds: float) -> None:
        """One model call of `rows` rows took `seconds`; the first one of the task gives the estimate."""
        self.calls.append((rows, seconds))
        if self.estimate is not None and self.every is not None and time.monotonic() - self.said_at >= self.every:
            planned = sum(p.rows for p in self.plans)
            self._say(
                f"{self.task}: {self.rows} of {planned} rows run, {_duration(time.monotonic() - self.started)} so far "
                f"(estimate {_duration(self.estimate)})"
            )
            self.said_at = time.monotonic()
        if self.estimate is None and self.plans and rows > 0:
            self.first = (rows, seconds)
            plan, tokens = self.plans[0], ""
            if len(self.plans) == 1 and plan.tokens and plan.batches[0] == rows:
                left = (sum(plan.tokens) - plan.tokens[0]) / plan.tokens[0]  # in first batches
                tokens = f" ({plan.tokens[0]} tokens with padding)"
            else:
                left = max(sum(p.rows for p in self.plans) - self.rows, 0) / rows
            self.estimate = (time.monotonic() - self.started) + seconds * left
            self._say(
                f"{self.task}: the first {rows} rows{tokens} took {seconds:.1f} s ({seconds / rows:.2f} s a row): estimate "
                f"{_duration(self.estimate)} for the task (timed on this machine, now; load on the machine changes it)"
            )
            self.said_at = time.monotonic()

    def _say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)


class TimedHFLM(HFLM):
    """lm-eval's `hf` backend, unchanged in what it computes, with a `Clock`: each task's plan (`loglikelihood_plan`,
    `generation_plan`) before its first batch, and every model call's rows and time. `bars=False` hides lm-eval's
    own progress bars of the model's requests (the main job: the clock says the time instead)."""

    def __init__(self, *args: Any, clock: Clock | None = None, bars: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock if clock is not None else Clock()
        self.bars = bars

    def _batch(self) -> int:
        return self.batch_size if isinstance(self.batch_size, int) else 0

    def _loglikelihood_tokens(self, requests: list[Any], disable_tqdm: bool = False, override_bs: int | None = None) -> list[Any]:
        cache = self.backend == "causal" and bool(self.logits_cache)
        self.clock.planned(loglikelihood_plan(requests, override_bs or self._batch(), logits_cache=cache))
        return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm or not self.bars, override_bs=override_bs)

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        self.clock.planned(generation_plan([r.args for r in requests], self._batch(), length=lambda s: len(self.tok_encode(s))))
        return super().generate_until(requests, disable_tqdm=disable_tqdm or not self.bars)

    def _model_call(self, inps: Any, attn_mask: Any = None, labels: Any = None) -> Any:
        t0 = time.perf_counter()
        out = super()._model_call(inps, attn_mask=attn_mask, labels=labels)
        self.clock.timed(int(inps.shape[0]), time.perf_counter() - t0)
        return out

    def _model_generate(self, context: Any, max_length: int, stop: list[str], **generation_kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = super()._model_generate(context, max_length, stop, **generation_kwargs)
        self.clock.timed(int(context.shape[0]), time.perf_counter() - t0)
        return out
