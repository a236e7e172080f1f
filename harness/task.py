"""The lm-eval classes of the Fifty Shades of Bias tasks: the few-shot sampler and the task classes
(YAML: `class: !function task.FsbTask`, `sampler: !function task.FsbSampler`).

This file is the one place that touches lm-eval's internals (what `LM_EVAL_CONTRACT` lists, checked
against the installed lm-eval by tests/evaluate/test_lm_eval_contract.py, which names the version it
was written for). Everything else, parsing, metrics and data, lives in the `fsb` package; only lm-eval
loads this file (the package never does).
"""

from __future__ import annotations

import logging
from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.samplers import FirstNSampler
from lm_eval.api.task import ConfigurableTask

from fsb.annotate.bwsprompt import BWS_LABELS, BWS_QUESTIONS, ProtocolError, fewshot_bin
from fsb.evaluate.fewshot import MAX_FEWSHOT, balanced_subset

LM_EVAL_TESTED = "0.4.13"
# What the classes below rely on beyond lm-eval's YAML interface: class -> attributes, and for methods the
# keyword arguments read or passed. An lm-eval upgrade that changes one fails the contract test loudly.
LM_EVAL_CONTRACT: dict[str, dict[str, tuple[str, ...]]] = {
    "lm_eval.api.task.ConfigurableTask": {
        "build_all_requests": (
            "limit",
            "samples",
            "rank",
            "world_size",
            "cache_requests",
            "rewrite_requests_cache",
            "system_instruction",
            "apply_chat_template",
            "fewshot_as_multiturn",
            "chat_template",
        ),
        "doc_iterator": ("rank", "limit", "world_size", "samples"),
        "fewshot_context": (
            "doc",
            "num_fewshot",
            "system_instruction",
            "apply_chat_template",
            "fewshot_as_multiturn",
            "chat_template",
            "gen_prefix",
        ),
        "construct_requests": ("doc", "ctx"),
        "download": ("dataset_kwargs",),
        "doc_to_prefix": ("doc",),
        "eval_docs": (),
        "instances": (),
        "OUTPUT_TYPE": (),
    },
    "lm_eval.api.samplers.FirstNSampler": {"sample": ("n", "eval_doc", "df")},
    "lm_eval.api.instance.Instance": {"__init__": ("request_type", "doc", "arguments", "idx"), "doc_id": ()},
}

log = logging.getLogger("lm_eval.tasks.fsb")


class FsbSampler(FirstNSampler):
    """The first k of a variant's fixed examples, balanced over the score bins when k < 8
    (`balanced_subset`); k > 8 is an error, not lm-eval's AssertionError."""

    def sample(self, n: int, eval_doc: Any = None, df: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        pool = list(df or self.df)
        return [pool[i] for i in balanced_subset(fewshot_bin([float(d["score"]) for d in pool]).tolist(), n)]


class FsbTask(ConfigurableTask):
    """lm-eval's ConfigurableTask with three additions: the dataset it read (path, fingerprint, sample) is
    recorded in the task's config, hence in results_*.json (`dataset_path` and `metadata.fsb_source`); a
    request cache (`--cache_requests true`) built for other sentences, another dataset or other few-shot
    examples is detected and rebuilt, never paired by position with this run's sentences; the upstream
    chat variant refuses to run without chat turns."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # lm-eval's own download warns on every task that custom datasets take --metadata: noise here.
        self.dataset = self.config.custom_dataset(**(self.config.metadata or {}), **(self.config.dataset_kwargs or {}))
        source = getattr(self.dataset, "fsb_source", None)
        if source:
            self.config.metadata = {**(self.config.metadata or {}), "fsb_source": source}
            self.config.dataset_path = source["path"]

    def build_all_requests(self, **kwargs: Any) -> None:
        k = self.config.num_fewshot or 0
        if k > MAX_FEWSHOT:
            balanced_subset([0] * MAX_FEWSHOT, k)  # raises the one-line error
        protocol = (self.config.dataset_kwargs or {}).get("fsb_protocol")
        if protocol == "upstream" and k and not (kwargs.get("apply_chat_template") and kwargs.get("fewshot_as_multiturn")):
            raise ProtocolError(
                f"{self.config.task} follows the upstream script's chat turns: run it with --apply_chat_template --fewshot_as_multiturn"
            )
        super().build_all_requests(**kwargs)
        if kwargs.get("cache_requests") and not kwargs.get("rewrite_requests_cache"):
            stale = self._stale_requests(kwargs)
            if stale:
                log.warning("%s: the request cache does not match this run (%s); rebuilding it", self.config.task, stale)
                super().build_all_requests(**{**kwargs, "rewrite_requests_cache": True})
                if self._stale_requests(kwargs):
                    raise ProtocolError(f"{self.config.task}: rebuilt requests still do not match the sentences ({stale})")

    def _stale_requests(self, kwargs: dict[str, Any]) -> str | None:
        """Why the built or cached requests do not belong to this run's sentences, or None."""
        docs = self.eval_docs
        where = {"rank": kwargs.get("rank", 0), "world_size": kwargs.get("world_size", 1)}
        wanted = [i for i, _ in self.doc_iterator(limit=kwargs.get("limit"), samples=kwargs.get("samples"), **where)]
        seen: set[int] = set()
        for inst in self.instances:
            i = inst.doc_id
            if i >= len(docs) or inst.doc != docs[i]:
                now = docs[i]["id"] if i < len(docs) else "none"
                return f"the request for item {i} is for sentence id {inst.doc.get('id')}, not {now}"
            seen.add(i)
        if missing := set(wanted) - seen:
            return f"no request for {len(missing)} of the {len(wanted)} sentences"
        first = self.instances[0]
        if self._first_argument(first.doc, kwargs) != first.arguments[0]:
            return "the prompts differ (other few-shot examples or instructions)"
        return None

    def _first_argument(self, doc: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        """The first request's first argument (its prompt) for `doc`, freshly built."""
        return self.fewshot_context(
            doc,
            num_fewshot=self.config.num_fewshot or 0,
            system_instruction=kwargs.get("system_instruction"),
            apply_chat_template=kwargs.get("apply_chat_template", False),
            fewshot_as_multiturn=kwargs.get("fewshot_as_multiturn", False),
            chat_template=kwargs.get("chat_template"),
            gen_prefix=self.doc_to_prefix(doc),
        )


class FsbBwsTask(FsbTask):
    """FsbTask for the best-worst tasks: each document (a tuple) gives its requests for every rotation;
    `generate_until`: one answer per rotation; `loglikelihood`: per rotation the 4 labels after "Most:"
    and the 4 after "Least:" (two prompts, so a backend that caches a prompt's logits, as lm-eval's hf
    does, runs 2 forward passes per presentation)."""

    def build_all_requests(self, **kwargs: Any) -> None:
        # zero-shot, as the annotators were: lm-eval ignores --num_fewshot for a task configured with 0
        self._context_kwargs = kwargs
        super().build_all_requests(**kwargs)

    def _presentation(self, doc: dict[str, Any], shift: int, kwargs: dict[str, Any]) -> Any:
        return FsbTask._first_argument(self, {**doc, "shift": int(shift)}, kwargs)

    def _first_argument(self, doc: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        ctx = self._presentation(doc, doc["rotations"][0], kwargs)
        return ctx if self.OUTPUT_TYPE == "generate_until" else ctx + f"{BWS_QUESTIONS[0]}:"

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Any]:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        built = getattr(self, "_context_kwargs", {})
        out = []
        for shift in doc["rotations"]:
            prompt = self._presentation(doc, shift, built)
            if self.OUTPUT_TYPE == "generate_until":
                args: list[tuple[Any, ...]] = [(prompt, dict(self.config.generation_kwargs or {}))]
                kind = "generate_until"
            else:
                args = [(prompt + f"{q}:", f" {label}") for q in BWS_QUESTIONS for label in BWS_LABELS]
                kind = "loglikelihood"
            out += [Instance(request_type=kind, doc=doc, arguments=a, idx=len(out) + j, **kwargs) for j, a in enumerate(args)]
        return out
