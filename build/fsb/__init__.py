"""fsb: the toolkit that builds, scores, evaluates and publishes the Fifty Shades of Bias dataset.

Data flows one way: raw files -> validated tables -> tuples/annotations -> scores -> dataset folder ->
Hub / harness (__main__ is `python -m fsb`). Each stage is a folder; the command line (cli/) is a
thin layer over them, `tables/` reads every raw file into checked tables and `core/` is the ground floor they
all stand on (tests/test_imports.py checks there is no import cycle and that every folder is on this map).
Schema and bins live outside the package, in the top-level module fifty_shades_of_bias; the lm-eval task is
the folder harness/.

core/       errors, readers (input that names file/line/field), atomic (atomic file writes), folders (folder
            swaps), seals (seals and records of what fsb wrote), output (the output layer every command writes
            through), secrets (redaction of keys and tokens in the forms URLs, headers, logs and servers
            write them: any case, URL-encoded, JSON/HTML-escaped, hex, base64; safe URLs), logredact (every
            log record and warning redacted, logging patched when first imported), resources
tables/     raw files -> validated tables, the first stage: csvrows (validated CSV/JSONL rows, the one id rule,
            the generations), judgments (the judgments reader: which path a file takes, the checks), rules (the
            judgments layout's header, label and row rules, shared by every path), wholefile (the whole-file
            paths: pyarrow, Python's csv), streamcells (large files of string labels read block by block:
            memory follows the judgments, not the file), labelcodes (labels coded once: 8-byte words, best/worst
            by comparison), items (a study's item list)
bws/        best-worst scaling on arrays and label tables: counting, reliability, designs, tuples (a study's
            design file, position-balanced), extend, coded (judgments coded as items and tuples: the shape
            below scoring, bootstrap and newton), scoring, maxdiff, bootstrap (per-item intervals), newton
            (its batched Newton refits), tails (its quantiles, streamed), adaptive (the next round planned
            from the judgments so far), information (a judgment's Fisher information and the bound it puts
            on adaptive rounds), bounds (which scores are bounds, not estimates: the `bound` column), value
            (Hollis's value and Rescorla-Wagner scoring) (the public API is re-exported from fsb.bws)
data/       the dataset: release (upstream files), dataset (FSB's build), rounds (updates), buildfolder (the
            folder's rules and record), study_build, study_card, study_items (any best-worst study),
            annotators (pseudonyms, agreement), intervals, reference (the human figures: split-half, full
            panel, noise ceiling), card, cardmeta, diff, localbuild, publish_plan, publish, download and hub (the Hub)
annotate/   forms (annotators' forms and their answers), labelstudio, layouts and layouts_files (other tools' judgments files),
            bwsprompt (the best-worst prompt, rotations and strict parser shared with the harness), and llm (a
            model as a best-worst annotator)
generate/   seeds, prompts, generations, explain, keys, marks: graded biased text from seeds
engine/     the request engine every paid request goes through: endpoint, plan, responses, journal, outputs,
            runner, batch, console
evaluate/   runner (lm-eval), metrics (parsing and the task metrics), fewshot (the rating tasks' data),
            runfiles (lm-eval run folders), results, agreement, baselines, report (its numbers), reportmd,
            reportbws, reportcells (its Markdown), reportfig (its figures), reportout (its files), models (the
            default real model), forward_passes (what lm-eval's hf backend runs: rows planned, counted, timed),
            mainjob (the README's main job)
analyse/    the paper's analyses: sentences, terms, analysis, markdown (report.md), figures
cli/        the `fsb` command: app (parser, dispatch), registry, argtypes, engine_args, common (shared
            options, the folder-or-ORG/NAME@REV parser), and one module per stage's commands: data, bws,
            annotate, annotate_llm, generate, evaluate, report, publish, analyse
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """`fsb.__version__`, read once from the installed metadata (one place: pyproject.toml), on first use:
    importing importlib.metadata costs more than `fsb --help` should pay for `import fsb.core.errors`."""
    if name != "__version__":
        raise AttributeError(f"module 'fsb' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("fifty-shades-of-bias")
    except PackageNotFoundError:  # a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
