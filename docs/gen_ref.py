"""Generate the docs site's reference pages from the code, so they cannot go stale (`make docs` runs this
before `mkdocs build --strict`).

Writes into docs/reference/ (git-ignored, rewritten whole on every run):

- cli.md: every `fsb` subcommand and option, walked generically from the argparse parser of fsb.cli.app
  (nested subcommands such as `fsb annotate export` included); no command name is written here.
- api/<wing>.md: one page per stage folder ("wing") of build/fsb, found by walking the package; each
  module rendered from its docstrings by mkdocstrings (`::: fsb.bws.counting`).
- tasks.md: the lm-eval tasks and groups of harness/*.yaml.
- card-fields.md: the dataset's fields, types from `fifty_shades_of_bias.features(config)`, meanings from
  the card template (dataset_card/card.md); a field the card does not describe is marked so.
- _analysis-figures.md and figures/*.png: the paper's figures, computed from a local copy of the release by
  fsb's analysis code (included by docs/analyses.md).
- _wings.md: the package map, taken from build/fsb/__init__.py's docstring (included by docs/layout.md).

Also writes placeholder pages for measured figures that other jobs own, only when they are absent, so
the navigation never breaks: docs/figures/speed.md (the benchmarks), docs/figures/test-suite.md and docs/figures/main-job.md
(`fsb main`). An existing file is never touched.
"""

from __future__ import annotations

import argparse
import ast
import html
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REF = DOCS / "reference"
PACKAGE = ROOT / "build" / "fsb"

# The README's quoted line of the main job's page starts with this marker (tests/test_docs.py checks both agree).
MAIN_JOB_MARK = "<!-- fsb-main-job-total -->"
PLACEHOLDERS = {
    "figures/speed.md": (
        "# Speed\n\n"
        '!!! note "Not measured in this checkout yet"\n'
        "    This page is written by the benchmarks (`make bench`): what was run, on what machine and when,\n"
        "    and each figure's ratio to a reference measured in the same run. Run `make bench` to fill it.\n"
    ),
    "figures/test-suite.md": (
        "# The test suite's time, measured\n\n"
        '!!! note "Not measured in this checkout yet"\n'
        "    This page is written by `python benchmarks/bench_suite.py --out docs/figures/test-suite.md`: the full\n"
        "    suite (`make test`'s pytest command) and the fast tier (`make check`), with CPU, load and the cache state.\n"
    ),
    "figures/main-job.md": (
        "# The main job, measured\n\n"
        "This page is written by `fsb main --record`: the date, the machine (cores, load), each step's\n"
        "time and the total. The README quotes the line below.\n\n"
        f"{MAIN_JOB_MARK} **Total time of `make main`:** not yet recorded in this checkout; "
        "`fsb main` prints its expected time before each evaluation.\n"
    ),
}


def md_text(text: str | None) -> str:
    """Prose as safe Markdown inside a table cell: HTML-escaped, pipes, brackets and emphasis markers
    escaped; `code` spans kept (only their pipes escaped) when the backticks pair up."""
    text = " ".join((text or "").split())
    parts = re.split(r"(`[^`]+`)", text) if text.count("`") % 2 == 0 else [text]
    return "".join(
        part.replace("|", "\\|")
        if part.startswith("`") and len(part) > 1
        else re.sub(r"([|*_\[\]`\\])", r"\\\1", html.escape(part, quote=False))
        for part in parts
    )


# --- the CLI ------------------------------------------------------------------------------------


class _Captured(BaseException):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def cli_parser() -> argparse.ArgumentParser:
    """The `fsb` parser: whatever fsb.cli.app.main parses with, captured at its first parse_args call.

    No builder name is assumed: main() is run with a patched ArgumentParser.parse_args that hands back
    the parser instead of parsing, so a restructured CLI is documented as it stands."""
    import fsb.cli.app as app

    if hasattr(app, "build_parser"):  # the whole parser: `main` builds only the invoked command's options
        return app.build_parser()
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        app.main(["--help"])
    except _Captured as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    raise RuntimeError("fsb.cli.app.main never called ArgumentParser.parse_args")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the parser's order (aliases skipped)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, expand(helps.get(name) or sub.description, {"prog": sub.prog}), sub


def expand(text: str | None, params: dict[str, Any]) -> str:
    """Help text as argparse prints it: %(default)s and friends filled in, %% a percent sign."""
    if not text or "%" not in text:
        return text or ""
    try:
        return text % params
    except (KeyError, TypeError, ValueError):
        return text


def _option_row(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs != 0:
            names += " " + formatter._format_args(action, action.dest.upper())
    else:
        names = formatter._format_args(action, action.dest)
    text = expand(action.help, {**vars(action), "prog": parser.prog})
    notes = []
    if action.choices is not None:
        notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.required and action.option_strings:
        notes.append("required")
    if action.option_strings and action.nargs != 0 and action.default is not False and action.default not in (None, argparse.SUPPRESS, []):
        notes.append(f"default `{action.default}`")
    if isinstance(action, argparse._AppendAction):
        notes.append("may be repeated")
    return f"| `{names}` | {md_text(text)} | {'; '.join(notes)} |"


def cli_sections(parser: argparse.ArgumentParser, name: str, depth: int = 2) -> Iterator[str]:
    """Markdown for `parser` and, recursively, every subcommand under it."""
    yield f"{'#' * min(depth, 6)} `{name}`\n"
    if parser.description:
        yield md_text(parser.description) + "\n"
    usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
    yield f"```text\n{usage}\n```\n"
    rows = [
        _option_row(a, parser)
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction) and a.help != argparse.SUPPRESS
    ]
    if rows:
        yield "| argument | what it does | choices, default |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    subs = list(_subcommands(parser))
    if subs:
        yield "| subcommand | what it does |\n|---|---|\n" + "\n".join(f"| `{name} {n}` | {md_text(h)} |" for n, h, _ in subs) + "\n"
        for n, _, sub in subs:
            yield from cli_sections(sub, f"{name} {n}", depth + 1)


def write_cli() -> list[str]:
    parser = cli_parser()
    body = "\n".join(cli_sections(parser, "fsb", 2))
    (REF / "cli.md").write_text(
        "# Command-line reference\n\nGenerated from the `fsb` argparse parser by `docs/gen_ref.py`; `fsb COMMAND --help` "
        "prints the same. Every expected failure is one line, `fsb COMMAND: error: ...`, and exit code 2.\n\n" + body
    )
    return [n for n, _, _ in _subcommands(parser)]


# --- the API, wing by wing ----------------------------------------------------------------------


def wings() -> list[tuple[str, list[str]]]:
    """(wing, its modules) for every package folder under build/fsb, in the package docstring's order."""
    order = [line.split("/")[0] for line in package_doc().splitlines() if re.match(r"^\w+/\s", line)]
    found = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    result = []
    for wing in sorted(found, key=lambda w: (order.index(w) if w in order else len(order), w)):
        modules = sorted(p.stem for p in (PACKAGE / wing).glob("*.py") if p.stem != "__init__" and not p.stem.startswith("_"))
        result.append((wing, modules))
    return result


def package_doc() -> str:
    return ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""


def write_api() -> list[str]:
    (REF / "api").mkdir(parents=True, exist_ok=True)
    names = []
    for wing, modules in wings():
        parts = [f"# `fsb.{wing}`\n", f"::: fsb.{wing}\n    options:\n      members: false\n      show_root_heading: false\n"]
        parts += [f"## `fsb.{wing}.{m}`\n\n::: fsb.{wing}.{m}\n    options:\n      show_root_heading: false\n" for m in modules]
        (REF / "api" / f"{wing}.md").write_text("\n".join(parts))
        names.append(wing)
    spec = "# `fifty_shades_of_bias`\n\nThe dataset's definition: configs, features, bins, the pinned release, `load()`.\n\n"
    (REF / "api" / "fifty_shades_of_bias.md").write_text(spec + "::: fifty_shades_of_bias\n    options:\n      show_root_heading: false\n")
    index = ["# API reference\n", "Rendered from the docstrings. The package's map, from `build/fsb/__init__.py`:\n"]
    index += [f"- [`fsb.{w}`]({w}.md)" for w in names] + ["- [`fifty_shades_of_bias`](fifty_shades_of_bias.md) (the schema module)"]
    (REF / "api" / "index.md").write_text("\n".join(index) + "\n")
    return names


def write_wings() -> None:
    """The wings table for docs/layout.md, from the package docstring (the map tests/test_imports.py checks)."""
    doc = package_doc()
    intro, _, _ = doc.partition("\n\n")
    rows, current = [], None
    for line in doc.splitlines():
        m = re.match(r"^(\w+)/\s+(.*)$", line)
        if m:
            current = [m.group(1), m.group(2)]
            rows.append(current)
        elif current and line.startswith(" ") and line.strip():
            current[1] += " " + line.strip()
        else:
            current = None
    table = "| wing | what it holds | API |\n|---|---|---|\n" + "\n".join(
        f"| `{w}/` | {md_text(t)} | [fsb.{w}](reference/api/{w}.md) |" for w, t in rows
    )
    rest = " ".join(doc.split("\n\n", 1)[1].split("\n\n")[0].split()) if "\n\n" in doc else ""
    (REF / "_wings.md").write_text(f"{md_text(' '.join(intro.split()))}\n\n{md_text(rest)}\n\n{table}\n")


# --- the lm-eval tasks --------------------------------------------------------------------------


class _TaskLoader(yaml.SafeLoader):
    """YAML with lm-eval's `!function module.name` tags read as plain strings."""


_TaskLoader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix} {loader.construct_scalar(node)}")


def _read_task(path: Path) -> dict[str, Any]:
    """A task file with its `include:` resolved; `_comment` is the file's own leading comment."""
    text = path.read_text()
    data = yaml.load(text, Loader=_TaskLoader) or {}  # a SafeLoader subclass
    if "include" in data:
        data = {**_read_task(path.parent / data["include"]), **{k: v for k, v in data.items() if k != "include"}}
    data["_comment"] = " ".join(ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#"))
    return data


def write_tasks() -> list[str]:
    harness = ROOT / "harness"
    groups, tasks = {}, {}
    for path in sorted(harness.glob("*.yaml")):
        data = _read_task(path)
        if "group" in data:
            groups[data["group"]] = [t if isinstance(t, str) else t.get("task") for t in data.get("task", [])]
        elif isinstance(data.get("task"), str):
            tasks[data["task"]] = data
    member_of = {t: g for g, members in groups.items() for t in members}
    lines = [
        "# lm-eval tasks",
        "",
        "Generated from `harness/*.yaml` by `docs/gen_ref.py`. Run any name with `lm_eval --tasks NAME` or `fsb eval --tasks NAME`.",
        "",
        "## Groups",
        "",
        "| group | tasks | metrics (mean over the tasks) |",
        "|---|---|---|",
    ]
    for g, members in groups.items():
        metrics = sorted({m["metric"] for t in members if t in tasks for m in tasks[t].get("metric_list", [])})
        lines.append(f"| `{g}` | {', '.join(f'`{t}`' for t in members)} | {', '.join(metrics)} |")
    lines += ["", "## Tasks", "", "| task | group | output | shots | metrics | note |", "|---|---|---|---|---|---|"]
    for name, t in tasks.items():
        metrics = ", ".join(m["metric"] for m in t.get("metric_list", []))
        shots = t.get("num_fewshot", 0)
        lines.append(
            f"| `{name}` | {member_of.get(name, '')} | {t.get('output_type', '')} | {shots} | {metrics} | {md_text(t['_comment'])} |"
        )
    (REF / "tasks.md").write_text("\n".join(lines) + "\n")
    return list(groups) + list(tasks)


# --- the card's fields --------------------------------------------------------------------------


def card_meanings() -> dict[str, dict[str, str]]:
    """{config: {field: meaning}} from the card template's field tables."""
    import fifty_shades_of_bias as spec

    fill = {
        "seed_type_names": ", ".join(spec.SEED_TYPES),
        "prompt_type_names": ", ".join(spec.PROMPT_TYPES),
        "edge_1": str(spec.ANALYSIS_BIN_EDGES[0]),
        "edge_2": str(spec.ANALYSIS_BIN_EDGES[1]),
        "anchor_round": "1",
        "level": "95%",
    }
    meanings: dict[str, dict[str, str]] = {}
    config = None
    for line in (ROOT / "dataset_card" / "card.md").read_text().splitlines():
        m = re.match(r"^\*\*`(\w+)`\*\*", line)
        if m:
            config = m.group(1)
        m = re.match(r"^\| `(\w+)` \| [^|]* \| (.*) \|$", line)
        if config and m:
            text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda x: "${" + x.group(1) + "}", m.group(2))  # Jinja2 fields too
            text = re.sub(r"\$\{(\w+)\}", lambda x: fill.get(x.group(1), "${" + x.group(1) + "}"), text)
            text = re.sub(r"\s*\([^()]*\$\{\w+\}[^()]*\)", "", text).replace("${", "").replace("}", "")
            meanings.setdefault(config, {})[m.group(1)] = text
    return meanings


def _type_name(feature: Any) -> str:
    kind = type(feature).__name__
    if kind == "Value":
        return feature.dtype
    if kind == "ClassLabel":
        return "ClassLabel: " + ", ".join(feature.names)
    if hasattr(feature, "feature"):
        length = getattr(feature, "length", -1)
        return f"list of {length if length and length > 0 else 'any number of'} {_type_name(feature.feature)}"
    return kind


def write_fields() -> list[str]:
    import fifty_shades_of_bias as spec

    meanings = card_meanings()
    lines = [
        "# The dataset's fields",
        "",
        "Generated by `docs/gen_ref.py`: types from `fifty_shades_of_bias.features(config)` "
        "(the one schema the Parquet files and the card declare), meanings from the card template `dataset_card/card.md`.",
        "",
    ]
    missing = []
    for config in spec.CONFIGS:
        lines += [f"## `{config}`", "", "| field | type | meaning |", "|---|---|---|"]
        for field, feature in spec.features(config).items():
            meaning = meanings.get(config, {}).get(field)
            if meaning is None:
                missing.append(f"{config}.{field}")
                meaning = "*not described in the card template*"
            lines.append(f"| `{field}` | {_type_name(feature)} | {meaning} |")
        lines.append("")
    (REF / "card-fields.md").write_text("\n".join(lines))
    return missing


def write_analysis_figures() -> list[str]:
    """The paper's figures, computed from the release by fsb's own analysis code (what `fsb analyse` writes),
    into docs/reference/figures/, and the snippet docs/analyses.md includes. Without a local copy of the
    release (nothing is downloaded here) the snippet says how to see them."""
    import shutil
    import tempfile

    from fsb.data.release import ANNOTATIONS, GENERATIONS, find_local_release

    snippet = REF / "_analysis-figures.md"
    release = find_local_release()
    if release is None:
        snippet.write_text(
            '!!! note "Figures not rendered in this build"\n    `make docs` renders them from a local copy of the release '
            "(`../shared/data/fsb-upstream` or `$FSB_RAW_DIR`); `fsb analyse` writes the same figures anywhere.\n"
        )
        return []
    from fsb.analyse import analysis
    from fsb.data.dataset import build_dataset

    figures = REF / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = build_dataset(release / GENERATIONS, release / ANNOTATIONS, Path(tmp) / "dataset", record=False, trials=10)
        analysis.write_analysis(analysis.read_sentences(str(built.out)), Path(tmp) / "analysis")
        order = ["score_histogram.png", "seed_type_by_bin.png", "prompt_type_by_bin.png"]  # the paper's order; any others after
        names = sorted((p.name for p in (Path(tmp) / "analysis").glob("*.png")), key=lambda n: (order.index(n) if n in order else 9, n))
        for name in names:
            shutil.copyfile(Path(tmp) / "analysis" / name, figures / name)
    fingerprint = built.stats["fingerprint"][:16]
    lines = [f"Rendered by `make docs` from the release (dataset fingerprint `{fingerprint}`) by `fsb.analyse`, as `fsb analyse` does.\n"]
    lines += [f"![{name.removesuffix('.png').replace('_', ' ')}](reference/figures/{name})\n" for name in names]
    snippet.write_text("\n".join(lines))
    return names


def write_placeholders() -> list[str]:
    written = []
    for rel, text in PLACEHOLDERS.items():
        path = DOCS / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(rel)
    return written


def main() -> int:
    for p in (ROOT / "build", ROOT):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    REF.mkdir(parents=True, exist_ok=True)
    for old in (*REF.rglob("*.md"), *REF.rglob("*.png")):
        old.unlink()
    commands = write_cli()
    api = write_api()
    write_wings()
    tasks = write_tasks()
    missing = write_fields()
    figures = write_analysis_figures()
    placeholders = write_placeholders()
    print(
        f"docs/reference: cli ({len(commands)} commands), api ({len(api)} wings), tasks ({len(tasks)}), card fields, "
        f"{len(figures) or 'no'} analysis figures{'' if figures else ' (no local copy of the release)'}"
    )
    for rel in placeholders:
        print(f"docs/{rel}: absent, wrote a placeholder")
    for field in missing:
        print(f"gen_ref: warning: field {field} has no meaning in dataset_card/card.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
