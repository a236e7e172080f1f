"""The layout rules of issue 21, checked from the source with ast (nothing of fsb is imported but its path):
modules a reader can hold (<= 400 lines, or <= 600 with a `(size: ...)` reason in the docstring's first
lines; functions <= 80 lines), no `_private` name used across fsb modules, no fsb module loading a file by
path (the harness is a thin adapter over the package, never the other way), the test suite on fsb's public
names only, and the cost markers that conftest.py gives to tests.

Each rule has an allowlist of the offenders of 2026-12-01 (the day the package became wings), each with the
wing whose split is pending, so that main stays green while the splits land; an entry that no longer
offends is reported as a warning (prune it). A new offender fails.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import fsb
from tests.conftest import ASSIGNED

PACKAGE = Path(fsb.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent
MAX_LINES, SIZE_REASON_LINES, MAX_FUNCTION = 600, 400, 80

# --- allowlists: today's offenders, each with the wing whose split is pending ------------------------------
OVER_600: dict[str, str] = {}
OVER_400_WITHOUT_REASON = {**OVER_600}
LONG_FUNCTIONS = {}
PRIVATE_ACROSS_MODULES = {}
LOADS_BY_PATH = {}
TESTS_ON_PRIVATE_NAMES = {
    "tests/bws/test_extend.py: fsb.bws.extend._max_shared_with": "the overlap check itself, tested on designs made to break it",
    "tests/cli/test_app.py: fsb.cli.app._commands": "the registry of the lazily built parser, checked for workflow order",
    "tests/cli/test_app.py: fsb.cli.app._parser": "the lazily built parser, checked for one subcommand's options only",
    "tests/core/test_data_loss.py: fsb.core.folders._swap_in": "the folder swap's kill window, patched to kill inside it",
}

# Issue 21's mirror: tests/<wing>/test_<module>.py for fsb/<wing>/<module>.py. Today's test modules that are
# not named after a module, and modules with no test module of their own (their tests live elsewhere).
TESTS_NOT_MIRRORING = {
    "cli/test_cli.py": "cross-cutting: the real `fsb` command in subprocesses (score, tuples, build, fetch-release)",
    "core/test_bad_input.py": "cross-cutting: refusals of bad input through the CLI (tables/, data/dataset)",
    "core/test_data_loss.py": "cross-cutting: the output layer's promises through the CLI (core/atomic, folders, seals, output)",
    "core/test_kill_build.py": "cross-cutting: a build killed half way (core/folders, data/dataset)",
    "data/test_update_path.py": "cross-cutting: the whole update path end to end",
    "evaluate/test_bws_task.py": "the harness/ task folder (not a package module): the best-worst tasks end to end through lm-eval",
    "evaluate/test_harness.py": "the harness/ task folder (not a package module): the rating tasks end to end through lm-eval",
    "evaluate/test_lm_eval_e2e.py": "cross-cutting: lm-eval end to end on the tiny scoring model",
    "evaluate/test_reference.py": "split pending in data: tests data/reference -> tests/data/test_reference.py",
    "generate/test_generate.py": "split pending in generate: generations, prompts, explain and the engine in one file",
    "tables/test_tables.py": "split pending in tables: the id rule (csvrows) and the judgments reader's refusals",
    "tables/test_tables_properties.py": "split pending in tables: property tests of every reader path",
    "generate/test_generate_faults.py": "cross-cutting: the request engine against a faulty proxy (engine/runner)",
}
_UNTESTED_BY_NAME = {  # wing -> modules with no test module of their own today (tested through other test modules)
    "analyse": "figures sentences",
    "annotate": "llm",
    "cli": "annotate_llm common data engine_args evaluate publish registry",
    "core": "atomic errors readers resources seals",
    "tables": "csvrows",
    "data": "annotators buildfolder cardmeta hub intervals localbuild publish_plan reference rounds study_card study_items",
    "engine": "batch console endpoint journal outputs plan responses",
    "evaluate": "agreement models reportbws reportcells reportfig reportmd reportout runfiles",
    "generate": "explain generations keys marks prompts",
}
MODULES_WITHOUT_TESTS = {
    f"{wing}/{name}.py": f"split pending in {wing}: tested through other test modules today"
    for wing, names in _UNTESTED_BY_NAME.items()
    for name in names.split()
}


# --- reading the source ------------------------------------------------------------------------------------


def package_modules() -> dict[str, Path]:
    """fsb's modules by path relative to the package (`core/atomic.py`)."""
    return {p.relative_to(PACKAGE).as_posix(): p for p in sorted(PACKAGE.rglob("*.py"))}


def dotted(rel: str) -> str:
    parts = ["fsb", *Path(rel).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def docstring_head(tree: ast.Module, lines: int = 5) -> str:
    return "\n".join((ast.get_docstring(tree) or "").splitlines()[:lines])


def module_too_long(text: str) -> str | None:
    """Why a module breaks the size rule, or None: over 600 lines, or over 400 without `(size: ...)`."""
    n = len(text.splitlines())
    if n > MAX_LINES:
        return f"{n} lines (limit {MAX_LINES})"
    if n > SIZE_REASON_LINES and "(size:" not in docstring_head(ast.parse(text)):
        return f"{n} lines with no `(size: ...)` reason in its docstring's first lines"
    return None


def long_functions(tree: ast.AST, limit: int = MAX_FUNCTION) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function or method longer than `limit` lines, decorators excluded."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    yield name, length
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(tree: ast.AST, here: str, package: str, own: set[str]) -> Iterator[str]:
    """`module.name` for every private fsb name this code takes from another fsb module: `from fsb.x import
    _y`, `import fsb._x`, and `alias._y` where alias is an fsb module imported here. `here` is the module's
    dotted name ("" for a test), `package` the package relative imports start from, `own` the names of
    modules counted as the same module (a package and its `__init__`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if not (base == "fsb" or base.startswith("fsb.")) or base in own:
                continue
            for part in base.split("."):
                if _private(part):
                    yield base
                    break
            for alias in node.names:
                if _private(alias.name):
                    yield f"{base}.{alias.name}"
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "fsb" or alias.name.startswith("fsb."):
                    if any(_private(p) for p in alias.name.split(".")):
                        yield alias.name
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "fsb"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            target = aliases.get(node.value.id)
            if target is not None and target not in own:
                yield f"{target}.{node.attr}"


def loads_by_path(tree: ast.AST) -> list[str]:
    """The calls that load Python code from a file path (importlib's spec_from_file_location, SourceFileLoader,
    runpy.run_path, exec of a file's text)."""
    banned = {"spec_from_file_location", "SourceFileLoader", "run_path", "SourcelessFileLoader"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in banned:
            found.append(node.attr)
        elif isinstance(node, ast.Name) and node.id in banned:
            found.append(node.id)
    return sorted(set(found))


def check(found: dict[str, str], allowed: dict[str, str], what: str) -> None:
    """Fail on offenders not in `allowed`; warn about allowlist entries that no longer offend."""
    if stale := sorted(set(allowed) - set(found)):
        warnings.warn(f"{what}: allowlist entries that no longer offend (prune them): {', '.join(stale)}", stacklevel=2)
    new = {k: v for k, v in found.items() if k not in allowed}
    assert not new, f"{what}:\n" + "\n".join(f"  {k}: {v}" for k, v in sorted(new.items()))


# --- the checks on the checkers (each must catch its violation) -----------------------------------------


def test_the_checkers_catch_what_they_are_for() -> None:
    long_module = '"""Doc."""\n' + "x = 1\n" * 450
    assert module_too_long(long_module) is not None
    assert module_too_long('"""Doc.\n\n(size: one table per reader)\n"""\n' + "x = 1\n" * 450) is None
    assert "limit 600" in (module_too_long('"""(size: x)"""\n' + "x = 1\n" * 601) or "")
    body = "def f():\n" + "    x = 1\n" * 80 + "class C:\n    def m(self):\n" + "        y = 2\n" * 81
    assert dict(long_functions(ast.parse(body))) == {"f": 81, "C.m": 82}
    code = "from fsb.core.files import _atomic, ok\nimport fsb.core._old\nfrom fsb.core import tables\ntables._id\nfrom . import _x\n"
    found = set(private_uses(ast.parse(code), "fsb.data.x", "fsb.data", {"fsb.data.x"}))
    assert found == {"fsb.core.files._atomic", "fsb.core._old", "fsb.core.tables._id", "fsb.data._x"}
    assert not set(private_uses(ast.parse("from fsb.data.x import _mine"), "fsb.data.x", "fsb.data", {"fsb.data.x"}))
    assert loads_by_path(ast.parse("import importlib.util as u\nu.spec_from_file_location('m', p)")) == ["spec_from_file_location"]


def test_cost_markers_follow_the_fixtures_and_code_a_test_uses() -> None:
    """conftest's markers on real collected tests (recorded before `-m` deselects any): a test behind the
    fault proxy and `transformers serve` with the tiny model is `model`, `server` and `slow`, one that reads
    the release is `release`, one against the test Hub is `server`, and a pure unit gets none."""
    expectations = {
        "tests/generate/test_generate_faults.py::test_failures_file_lists_what_is_left": {"model", "server", "slow"},
        "tests/data/test_dataset.py::test_scores_reproduce_the_release": {"release"},
        "tests/data/test_publish.py::test_dry_run_without_token_reads_only": {"server"},
        "tests/evaluate/test_mainjob.py::test_main_job_evaluates_smollm2_on_a_small_sample": {"model"},
        "tests/bws/test_designs.py::test_design_report_sees_a_triple_shared_by_two_tuples": set(),
        "tests/test_packaging.py::test_wheel_carries_the_task_card_and_module": {"slow"},
    }
    if not set(expectations) <= set(ASSIGNED):  # only part of the suite was collected
        pytest.skip("collect the whole suite (`pytest` or `make check`) to check the markers of real tests")
    for nodeid, want in expectations.items():
        assert ASSIGNED[nodeid] == want, f"{nodeid}: markers {sorted(ASSIGNED[nodeid])}, expected {sorted(want)}"


def test_a_test_using_the_tiny_model_is_marked_model(pytester: pytest.Pytester) -> None:
    """The rule itself on a throw-away test module: the fixtures' closure decides (`tiny_server` pulls in
    `tiny_model`), and a test with no costly fixture stays in the fast tier."""
    pytester.makeconftest(
        "import pytest\nfrom tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
        "@pytest.fixture\ndef tiny_model(): return 'm'\n"
        "@pytest.fixture\ndef tiny_server(tiny_model): return 'u'\n"
        "@pytest.fixture\ndef release(): return 'r'\n"
    )
    pytester.makepyfile(
        test_x="def test_model(tiny_model): pass\ndef test_served(tiny_server): pass\n"
        "def test_release(release): pass\ndef test_unit(): pass\n"
    )
    result = pytester.runpytest("-q", "-m", "not (slow or release or model or server or labelstudio)", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=3)
    result = pytester.runpytest("-q", "-m", "model and server", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=3)


# --- the rules on the package --------------------------------------------------------------------------


def test_no_module_over_600_lines() -> None:
    found = {}
    for rel, path in package_modules().items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            found[rel] = f"{n} lines"
    check(found, OVER_600, f"modules over {MAX_LINES} lines")


def test_modules_over_400_lines_say_why() -> None:
    found = {rel: why for rel, path in package_modules().items() if (why := module_too_long(path.read_text(encoding="utf-8")))}
    check(found, OVER_400_WITHOUT_REASON, "modules over 400 lines without a `(size: ...)` reason")


def test_no_function_over_80_lines() -> None:
    found = {}
    for rel, path in package_modules().items():
        for name, n in long_functions(ast.parse(path.read_text(encoding="utf-8"))):
            found[f"{rel}:{name}"] = f"{n} lines"
    check(found, LONG_FUNCTIONS, f"functions over {MAX_FUNCTION} lines")


def test_no_private_name_is_imported_from_another_fsb_module() -> None:
    found = {}
    for rel, path in package_modules().items():
        name = dotted(rel)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for use in private_uses(ast.parse(path.read_text(encoding="utf-8")), name, package, {name}):
            found[f"{rel}: {use}"] = "a private name of another module"
    check(found, PRIVATE_ACROSS_MODULES, "private names used across fsb modules")


def test_no_fsb_module_loads_code_by_path() -> None:
    """The package never loads a harness file (or any file) as code: the harness imports fsb, not the reverse."""
    found = {}
    for rel, path in package_modules().items():
        if calls := loads_by_path(ast.parse(path.read_text(encoding="utf-8"))):
            found[rel] = ", ".join(calls)
    check(found, LOADS_BY_PATH, "fsb modules that load code by path")


def test_fsb_never_imports_the_tests() -> None:
    for rel, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), f"{rel} imports the test suite"


def test_the_tests_use_fsb_public_names_only() -> None:
    """The test suite's own layer: tests import what fsb makes public (a private helper a test needs is made
    public or tested through its public caller). Code in strings (run in subprocesses) counts too."""
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue  # this file's examples of violations
        rel = path.relative_to(TESTS.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        trees = [tree]
        for node in ast.walk(tree):  # Python run with `python -c` from a string constant
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ("import fsb" in node.value or "from fsb" in node.value):
                try:
                    trees.append(ast.parse(node.value))
                except SyntaxError:
                    continue
        for t in trees:
            for use in private_uses(t, "", "tests", set()):
                found[f"{rel}: {use}"] = "a private fsb name in a test"
    check(found, TESTS_ON_PRIVATE_NAMES, "tests using private fsb names")


def test_test_modules_mirror_the_package() -> None:
    """Every tests/<wing>/test_<name>.py (or test_<name>_<topic>.py) is named after fsb/<wing>/<name>.py, or is a
    listed cross-cutting suite."""
    found = {}
    for path in sorted(TESTS.glob("*/test_*.py")):
        wing, module = path.parent.name, path.stem.removeprefix("test_")
        # test_<module>.py, or test_<module>_<topic>.py for one module's tests on one theme
        parts = module.split("_")
        if not any((PACKAGE / wing / f"{'_'.join(parts[:i])}.py").is_file() for i in range(len(parts), 0, -1)):
            found[f"{wing}/{path.name}"] = f"no fsb/{wing}/{module}.py"
    check(found, TESTS_NOT_MIRRORING, "test modules not named after a module of their wing")


def test_every_module_has_its_test_module() -> None:
    found = {
        rel: f"no tests/{Path(rel).parent}/test_{Path(rel).name}"
        for rel in package_modules()
        if "/" in rel and not rel.endswith("__init__.py") and not (TESTS / Path(rel).parent / f"test_{Path(rel).name}").is_file()
    }
    check(found, MODULES_WITHOUT_TESTS, "fsb modules without a test module of their own")
