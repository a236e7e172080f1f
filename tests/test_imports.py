"""The shape of the package: fsb's imports run one way (no cycle, counting the imports inside functions and
those under `if TYPE_CHECKING:` too: an import for a type hint never runs, but the module's signatures name
the other module's type, so a reader and a type checker must read it first; a circle through one is a
circle of the design, as bws's bootstrap -> scoring (`Coded`) -> bootstrap was), and the package docstring is
the map of every module. Computed from the source with ast: nothing is imported."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fsb

PACKAGE = Path(fsb.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """fsb module -> the fsb modules it imports (at import, inside functions or for type hints), from the source."""
    modules = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from fsb.cli import app` imports the submodule app (its package is already initialised)
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = subs if all(t in modules for t in subs) else [base, *subs]
            for t in targets:
                if t in modules and t != name and t != "fsb":  # `from . import x` counts as x, not the package
                    found.add(t)
        graph[name] = found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_for_type_hints_and_inside_functions_are_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle closed only by an import under `if TYPE_CHECKING:` (as bws's was) or inside a function is found."""
    pkg = tmp_path / "fsb"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fsb.high import T\n", encoding="utf-8")
    (pkg / "high.py").write_text("def f():\n    from fsb import low\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert import_graph() == {"fsb": set(), "fsb.high": {"fsb.low"}, "fsb.low": {"fsb.high"}}
    assert find_cycle(import_graph()) == ["fsb.high", "fsb.low", "fsb.high"]


def test_fsb_imports_have_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 40 and "fsb.engine.runner" in graph and "fsb.analyse.analysis" in graph["fsb.cli.analyse"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_package_docstring_maps_every_module() -> None:
    doc = fsb.__doc__ or ""
    words = set(re.findall(r"[A-Za-z_]+", doc))
    missing = sorted(name for name in import_graph() if name != "fsb" and name.rpartition(".")[2] not in words)
    assert not missing, f"fsb/__init__.py's docstring does not name: {', '.join(missing)}"


def test_fsb_score_on_a_small_file_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """Issue 23: `fsb score` on 10 rows within 0.2 s of CPU. Guards the start-up imports that were cut: the
    designs and reliability modules (lazy re-exports of fsb.bws), logging and html.entities (fsb.core.logredact's
    redaction, installed without them), the label coding of large files (labelcodes),
    pyarrow and pandas; and checks the scores are written and `from fsb.bws import bws_design` still works."""
    rows = ["Item1,Item2,Item3,Item4,BestItem,WorstItem", *(f"{i},{i + 1},{i + 2},{i + 3},{i},{i + 3}" for i in range(1, 11))]
    (tmp_path / "a.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    unwanted = ["fsb.bws.designs", "fsb.bws.reliability", "fsb.tables.labelcodes", "logging", "html.entities", "pyarrow", "pandas"]
    code = (
        "import json, sys\n"
        "from fsb.cli import main\n"
        "status = main(['score', 'a.csv', '--out', 's.csv'])\n"
        f"loaded = [m for m in {unwanted!r} if m in sys.modules]\n"
        "from fsb.bws import bws_design, split_half_reliability\n"
        "import fsb.bws\n"
        "found = callable(bws_design) and callable(split_half_reliability), 'try_swap' in dir(fsb.bws)\n"
        "json.dump([status, loaded, *found], open('r.json', 'w'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    status, loaded, reexported, listed = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert status == 0 and loaded == [] and reexported and listed
    lines = (tmp_path / "s.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 14 and lines[1] == "1,1.000000,1.000000,1,1,0,best-always"
    assert lines[-1] == "13,-1.000000,0.000000,1,0,1,worst-always"  # the bound column (issue 30, section 3)
