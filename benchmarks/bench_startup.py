"""Benchmark: start-up costs. By default, `fsb eval` (lm-eval's Python API with a TaskManager over this
project's tasks only) against `lm_eval` (its CLI, which indexes every built-in task), on the same tiny run.

Both run the same task on one sentence with lm-eval's `dummy` model, so the wall time is almost all
start-up: imports, task indexing, loading the dataset. Each is timed `--repeat` times alternately, and
the best of each is printed with their ratio (same machine, same minutes).

With `--score`: `fsb score` on a 10-row judgments file (issue 23: <= 0.2 s), against the floors it
stands on (the interpreter; numpy, which every fsb command imports) and, with FSB_PERL_BWS set, the
NRC Perl counting script on the same file. CPU is user + system seconds of the child process (what a
loaded machine changes least); each line gives the median and the range over `--repeat` interleaved runs.
Without compiled bytecode (PYTHONDONTWRITEBYTECODE=1 and no __pycache__) every fsb module is compiled
on every run (about 0.05 s of CPU): the line says which case was measured. With `--baseline BUILD` (the
`build/` folder of another checkout, e.g. main's), that checkout's `fsb score` runs in the same rounds, so a
change's effect is read against the same minutes of load; `--compile` compiles both checkouts' modules first.

    python benchmarks/bench_startup.py [--repeat 3]
    python benchmarks/bench_startup.py --score [--repeat 9] [--baseline /tmp/main/build] [--compile]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _time(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def _child_cpu(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU, wall) seconds of one run of `cmd`; CPU = user + system time of the child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _time(cmd, env or dict(os.environ), cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def score_startup(repeat: int, baseline: str | None = None, compile_first: bool = False) -> int:
    """`fsb score` on 10 rows against the interpreter, numpy's import, (FSB_PERL_BWS) the Perl script and
    (`baseline`: a `build/` folder) another checkout's `fsb score`."""
    spec = importlib.util.find_spec("fsb")
    root = Path(spec.origin).parent if spec is not None and spec.origin else Path()
    if compile_first:
        for folder in (root.parent, *([Path(baseline)] if baseline else [])):
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], check=True, capture_output=True)
    rows = ["Item1,Item2,Item3,Item4,BestItem,WorstItem", *(f"{i},{i + 1},{i + 2},{i + 3},{i},{i + 3}" for i in range(1, 11))]
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "a.csv").write_text("\n".join(rows) + "\n")
        py = sys.executable
        runs = {
            "python -c pass (interpreter floor)": [py, "-c", "pass"],
            "python -c 'import numpy' (fsb's floor)": [py, "-c", "import numpy"],
            "fsb score, 10 rows": [
                py,
                "-c",
                "import sys; from fsb.cli import main; sys.exit(main())",
                "score",
                "a.csv",
                "--out",
                "s.csv",
                "--force",
            ],
        }
        envs = {name: None for name in runs}
        if baseline:
            runs["fsb score, 10 rows, baseline checkout"] = runs["fsb score, 10 rows"]
            envs["fsb score, 10 rows, baseline checkout"] = {**os.environ, "PYTHONPATH": str(Path(baseline).resolve())}
        perl = os.environ.get("FSB_PERL_BWS")
        if perl:
            script = str(Path(perl) / "get-scores-from-BWS-annotations-counting.pl")
            runs["Perl counting script, 10 rows"] = ["perl", "-I", perl, script, "a.csv", "p.csv"]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for _ in range(repeat):
            for name, cmd in runs.items():
                times[name].append(_child_cpu(cmd, cwd, envs.get(name)))
    cached = all(any((root / wing / "__pycache__").glob(f"{name}.*.pyc")) for wing, name in (("core", "judgments"), ("cli", "app")))
    compiled = "with compiled bytecode" if cached else "without compiled bytecode (fsb's modules compiled on every run)"
    print(f"median (min-max) over {repeat} interleaved runs, {compiled}, load {os.getloadavg()[0]:.2f}:")
    for name, got in times.items():
        cpu, wall = [c for c, _ in got], [w for _, w in got]
        print(f"  {name:42} CPU {statistics.median(cpu):.3f} s ({min(cpu):.3f}-{max(cpu):.3f})  wall {statistics.median(wall):.3f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--score", action="store_true", help="time fsb score on a 10-row file (see the module docstring)")
    parser.add_argument("--baseline", help="with --score: another checkout's build/ folder, timed in the same rounds")
    parser.add_argument("--compile", action="store_true", help="with --score: compile both checkouts' modules to bytecode first")
    args = parser.parse_args()
    if args.score:
        return score_startup(args.repeat, args.baseline, args.compile)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as cwd:
        common = ["--limit", "1"]
        fsb = [str(BIN / "fsb"), "eval", "--model", "dummy", "--tasks", "fsb_set0", "--output-path", f"{cwd}/a", *common]
        cli = [str(BIN / "lm_eval"), "--model", "dummy", "--tasks", "fsb_set0", "--output_path", f"{cwd}/b", "--log_samples", *common]
        t_fsb, t_cli = [], []
        for _ in range(args.repeat):
            t_fsb.append(_time(fsb, env, cwd))
            t_cli.append(_time(cli, env, cwd))
    print(f"fsb eval (own tasks only):      best {min(t_fsb):6.2f} s  of {args.repeat}")
    print(f"lm_eval CLI (all built-in tasks): best {min(t_cli):6.2f} s  of {args.repeat}")
    print(f"ratio lm_eval / fsb eval:        {min(t_cli) / min(t_fsb):6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
