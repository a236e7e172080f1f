"""Benchmark: `fsb generate` throughput against a real OpenAI-compatible server with added latency, at
concurrency 1, 4 and 16, as a ratio to the ideal.

Setup (all on 127.0.0.1): `transformers serve` with the tests' tiny model, behind the project's proxy
(tests/_proxy.py, in its own process) that holds every request for `--latency` seconds, the way a remote
API's round trip would. First a bare client (the `openai` client, one request at a time, no journal)
measures the per-request latency L through that same path; then for each concurrency c, `fsb generate`'s
engine (journal, fsync, retries armed, no progress bar) runs n = `--per-slot` x c fresh requests. The
ideal time is n x L / c; the ratio printed is ideal / measured (1.0 = no overhead, every slot always busy).
Beside it, the same n requests from a bare async openai client with c in flight (no journal, no
retries): the ceiling this machine, proxy and server allow, so the engine's own cost is the gap.
The server's own time per request (measured directly, without the proxy) is printed too: the server
handles one request at a time, so at high concurrency it can be the limit, not the client
(the best possible ratio is then about (L + s) / (c x s)). Everything is measured in the same run, so a
busy machine moves both sides; each figure is the best of `--repeat` runs. The engine's CPU time per
request (all threads of this process) shows its own cost apart from waiting.

    python benchmarks/bench_generate.py                      # latency 2 s, 3 requests a slot, best of 3, concurrency 1 4 16
    python benchmarks/bench_generate.py --latency 1 --per-slot 4 --concurrency 1 4 16 32
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fsb import engine  # noqa: E402
from fsb.generate.generations import build_generation_plan  # noqa: E402
from fsb.generate.prompts import load_prompt_set  # noqa: E402
from fsb.generate.seeds import Seed  # noqa: E402
from tests._tiny_model import build_tiny_model, serve  # noqa: E402


def _plan(model: str, tag: str, n: int) -> engine.RequestPlan:
    seeds = [Seed(f"Benchmark seed {tag} number {i}.", "neutral", "bench", str(i)) for i in range(n)]
    prompts = load_prompt_set(None, formats=("conversion",), shots=0)
    return build_generation_plan(
        seeds, prompts, ["conversion"], model, engine.Sampling(temperature=0.0, max_tokens=1, frequency_penalty=2.0)
    )


def _bare_latency(base_url: str, model: str, n: int) -> float:
    """Median seconds per request, one at a time, with the plain openai client (no journal, no engine)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="no-key", max_retries=0)
    times = []
    for i in range(n):
        t = time.perf_counter()
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": f"Warm-up {i}."}], max_tokens=1, temperature=0.0, frequency_penalty=2.0
        )
        times.append(time.perf_counter() - t)
    client.close()
    return statistics.median(times)


def _bare_concurrent(base_url: str, model: str, n: int, c: int, tag: str) -> float:
    """Seconds for n requests with c in flight, with the plain async openai client (no journal): the ceiling."""
    import asyncio

    import openai

    async def go() -> float:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="no-key", max_retries=0) as client:
            slots = asyncio.Semaphore(c)

            async def one(i: int) -> None:
                async with slots:
                    messages = [{"role": "user", "content": f"Bare {tag} {i}."}]
                    await client.chat.completions.create(
                        model=model, messages=messages, max_tokens=1, temperature=0.0, frequency_penalty=2.0
                    )

            t = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            return time.perf_counter() - t

    return asyncio.run(go())


def _start_proxy(upstream: str, latency: float, lifetime: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_proxy.py"), upstream, "--latency", str(latency), "--lifetime", str(lifetime)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the proxy did not start: {url!r}")
    return proc, url


def main() -> None:
    """Start the server and the proxy, measure L, then time fsb and a bare client at each concurrency."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency", type=float, default=2.0, help="seconds the proxy adds to every request (default 2)")
    p.add_argument("--per-slot", type=int, default=3, help="requests per concurrency slot in each run (default 3)")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--repeat", type=int, default=3, help="runs per concurrency; the best is kept (default 3)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="fsb-bench-") as tmp:
        folder = Path(tmp)
        model_dir = build_tiny_model(folder / "tiny-model")
        model = str(model_dir)
        with serve(model_dir, folder / "serve.log") as server:
            _bare_latency(server, model, 4)  # warm-up
            server_time = _bare_latency(server, model, 12)
            proxy, url = _start_proxy(server, args.latency, lifetime=1800)
            try:
                latency = _bare_latency(url, model, 8)
                added = f"+{args.latency:.2f} s"
                print(f"server alone: {server_time * 1000:.1f} ms a request; through the proxy ({added}): L = {latency:.3f} s")
                print(f"best of {args.repeat}; ratio = ideal / measured, ideal = requests x L / concurrency")
                header = ("concurrency", "requests", "ideal s", "fsb s", "req/s", "ratio", "bare client ratio", "fsb CPU ms/req")
                print(" ".join(f"{h:>{w}s}" for h, w in zip(header, (11, 8, 8, 7, 7, 6, 18, 15))))
                for c in args.concurrency:
                    n = args.per_slot * c
                    ideal = n * latency / c
                    best = bare = cpu = float("inf")
                    for k in range(args.repeat):
                        bare = min(bare, _bare_concurrent(url, model, n, c, f"c{c}-{k}"))
                        plan = _plan(model, f"c{c}-{k}", n)
                        options = engine.RunOptions(concurrency=c, retries=2, timeout=60)
                        t, t_cpu = time.perf_counter(), time.process_time()
                        result = engine.run(plan, folder / f"c{c}-{k}" / "gens.jsonl", engine.Endpoint(url), options)
                        best = min(best, time.perf_counter() - t)
                        cpu = min(cpu, time.process_time() - t_cpu)
                        if result.ok != n:
                            raise RuntimeError(f"only {result.ok} of {n} requests finished: {result.failures}")
                    figures = f"{c:11d} {n:8d} {ideal:8.2f} {best:7.2f} {n / best:7.2f} {ideal / best:6.2f} {ideal / bare:18.2f}"
                    print(f"{figures} {cpu / n * 1000:15.1f}", flush=True)
            finally:
                proxy.terminate()
                proxy.wait(timeout=20)


if __name__ == "__main__":
    main()
