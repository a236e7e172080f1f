"""The README's main job: build the dataset from the release, load it back through `datasets`, run the
paper's analyses, evaluate the default model on a simple random sample, and print the report."""

from __future__ import annotations

import os
import time
from pathlib import Path

import fifty_shades_of_bias as spec
from fsb.data.dataset import build_dataset
from fsb.data.release import ANNOTATIONS, GENERATIONS, release_dir

__all__ = ["run"]


def _step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def run(
    *,
    raw_dir: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] = spec.NAME,
    results: str | os.PathLike[str] = "results/main",
    skip_eval: bool = False,
    sample: int | None = None,
    per_bin: int | None = None,
    force: bool = False,
) -> int:
    """Run every stage in order, printing progress; returns the process exit code.

    `raw_dir` is the release folder (default: a local copy, else the pinned download), `out` the
    dataset folder, `results` where the analyses and the evaluation go. `skip_eval` stops after the
    analyses. The evaluation takes a simple random sample of `sample` sentences (default 32), or a
    stratified one of `per_bin` per equispaced bin (which inflates correlations).
    The analysis folder (results/.../analysis) is replaced on each run; it is refused only if it
    holds files that are not an earlier analysis. report.txt, timings.json and the baseline files in
    `results` are replaced only if unchanged since fsb wrote them, or with `force`; they are checked
    before anything is built, so a refusal changes nothing.
    """
    started = time.monotonic()
    if not skip_eval:
        from fsb.evaluate.runner import check_main_job_files

        check_main_job_files(results, force=force)
    _step("1/4 build the dataset from the release")
    folder = release_dir(raw_dir)
    print(f"release: {folder}")
    built = build_dataset(folder / GENERATIONS, folder / ANNOTATIONS, out)
    stats = built.stats
    print(f"built {built.out} (fingerprint {stats['fingerprint'][:16]})")

    _step("2/4 load it back with datasets.load_dataset")
    default = spec.load("default", source=built.out)
    annotations = spec.load("annotations", source=built.out)
    rows = default[spec.SPLIT]
    print(f"default: {rows.num_rows} rows, features {', '.join(rows.features)}")
    print(f"annotations: {annotations[spec.SPLIT].num_rows} rows")
    from fsb.data.reference import placed_split_half

    for line in placed_split_half(stats["shr"], sentences=rows.num_rows, release=bool(stats["release"]["is_release"])):
        print(line)
    print(
        "bins low/medium/high: " + " / ".join(f"{stats['bins']['counts'][b]} (paper {spec.PAPER['bin_counts'][b]})" for b in spec.BIN_NAMES)
    )

    _step("3/4 the paper's analyses: score histogram, seed and prompt type by bin, distinctive words")
    from fsb.analyse import analysis

    figures = Path(results) / "analysis"
    found = analysis.write_analysis(analysis.read_sentences(str(built.out)), figures)
    print(f"histogram (bins of 0.1): {' '.join(str(c) for c in found['histogram']['counts'])}")
    for b in spec.BIN_NAMES:
        print(analysis.marking_line(b, found["distinctive"]["unigrams"][b]))
    print(f"figures and report.md: {figures}")

    if skip_eval:
        print(f"\ndone in {time.monotonic() - started:.0f} s (evaluation skipped)")
        return 0
    _step("4/4 evaluate the default model on a sample, beside the baselines")
    from fsb.evaluate.runner import main_job_eval

    code = main_job_eval(built.out, Path(results), sample=sample, per_bin=per_bin, force=force)
    print(f"\ndone in {time.monotonic() - started:.0f} s")
    return code
