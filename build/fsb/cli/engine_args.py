"""The request engine's command-line options (endpoint, sampling, running), shared by every command that
asks a model (`fsb generate`, `fsb explain`, `fsb annotate llm`). Kept outside `fsb.engine` so that
building the parser imports nothing heavy (`fsb --help` stays light); `fsb.engine.console` turns the
parsed options into engine objects and prints runs."""

from __future__ import annotations

import argparse

from fsb.cli.argtypes import api_seed, backoff, concurrency, max_tokens, nonneg_int, penalty, retries, temperature, timeout, top_p

__all__ = ["add_endpoint_options"]


def add_endpoint_options(p: argparse.ArgumentParser, max_tokens_help: str) -> None:
    g = p.add_argument_group("endpoint and sampling")
    g.add_argument("--model", required=True, help="model name as the endpoint knows it (recorded in every row)")
    g.add_argument(
        "--base-url",
        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, else OpenAI's). "
        "The key is read from $OPENAI_API_KEY only; a local server may need none",
    )
    g.add_argument("--temperature", type=temperature, default=0.0, help="sampling temperature, 0 to 2 (default 0, as the release's script)")
    g.add_argument("--max-tokens", type=max_tokens, help=max_tokens_help)
    g.add_argument("--top-p", type=top_p, help="nucleus sampling, in (0, 1] (default: the server's)")
    g.add_argument("--frequency-penalty", type=penalty, help="default: the server's")
    g.add_argument("--presence-penalty", type=penalty, help="default: the server's")
    g.add_argument("--api-seed", type=api_seed, help="the request's `seed` field, for servers that honour it")
    g.add_argument("--stop", action="append", default=[], help="a stop sequence (repeatable)")
    r = p.add_argument_group("running")
    r.add_argument("--concurrency", type=concurrency, default=8, help="requests in flight at once, 1 to 256 (default 8)")
    r.add_argument("--retries", type=retries, default=5, help="retries per request on 429, 5xx, timeouts and bad answers (default 5)")
    r.add_argument("--timeout", type=timeout, default=60.0, help="seconds an attempt may take, sending to last byte (default 60)")
    r.add_argument("--backoff", type=backoff, default=1.0, help="first retry delay in seconds, doubled each retry up to 60 (default 1)")
    r.add_argument("--limit", type=nonneg_int, help="send at most this many unfinished requests in this run")
    r.add_argument("--dry-run", action="store_true", help="print the requests and a token estimate; send nothing, write nothing")
    r.add_argument("--no-progress", action="store_true", help="no progress bar (a summary line is still printed)")
