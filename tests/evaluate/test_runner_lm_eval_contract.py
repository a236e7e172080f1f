"""The one direction between harness/ and the package, and the lm-eval internals harness/task.py relies on.

An lm-eval upgrade that renames or drops an attribute, or a keyword argument, that task.py uses fails
here with the installed and the tested version named, instead of deep inside a run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"


def _load(name: str) -> ModuleType:
    """A harness file as a module (the test may; the package never does)."""
    found = importlib.util.spec_from_file_location(f"fsb_test_harness_{name}", HARNESS / f"{name}.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def test_the_lm_eval_internals_task_py_relies_on_exist() -> None:
    task = _load("task")
    installed = version("lm-eval")
    where = f"lm-eval {installed} is installed; harness/task.py was written against {task.LM_EVAL_TESTED}"
    for dotted, attrs in task.LM_EVAL_CONTRACT.items():
        module, _, name = dotted.rpartition(".")
        cls = getattr(importlib.import_module(module), name, None)
        assert cls is not None, f"{where}: {dotted} is gone"
        for attr, params in attrs.items():
            if attr == "doc_id":  # a dataclass field
                assert attr in getattr(cls, "__dataclass_fields__", {}), f"{where}: {dotted}.{attr} is gone"
                continue
            assert hasattr(cls, attr), f"{where}: {dotted}.{attr} is gone"
            if params:
                signature = inspect.signature(getattr(cls, attr))
                missing = [p for p in params if p not in signature.parameters]
                assert not missing, f"{where}: {dotted}.{attr}{signature} no longer takes {', '.join(missing)}"


def test_built_requests_are_where_task_py_reads_them(release_dataset: Path) -> None:
    """The coupling at run time: build_all_requests fills `instances` with Instances carrying doc_id and doc."""
    from fsb.evaluate.runner import task_manager

    manager = task_manager({"fsb_dataset": str(release_dataset), "fsb_sample": 3})
    (task,) = manager.load(["fsb_set0"])["tasks"].values()
    task.build_all_requests(limit=3, rank=0, world_size=1)
    assert [type(i) for i in task.instances] == [Instance] * 3
    assert [i.doc_id for i in task.instances] == [0, 1, 2] and task.instances[0].doc == task.eval_docs[0]
    assert task._stale_requests({"limit": 3}) is None, "freshly built requests match this run's sentences"


def test_the_package_never_loads_a_harness_file() -> None:
    offenders = []
    for path in sorted((REPO / "build" / "fsb").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "spec_from_file_location" in text or re.search(r"harness[\"')]*\s*/\s*[\"']\w+\.py", text):
            offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"load a harness file by path: {offenders}"
    code = (
        "import sys, fsb.evaluate.results, fsb.evaluate.agreement, fsb.evaluate.report, fsb.annotate.llm, fsb.cli.app\n"
        f"print([m for m, v in sys.modules.items() if str(getattr(v, '__file__', '') or '').startswith({str(HARNESS)!r})])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert done.stdout.strip() == "[]"


def test_harness_utils_is_a_thin_adapter_and_every_yaml_function_resolves() -> None:
    utils = HARNESS / "utils.py"
    assert len(utils.read_text(encoding="utf-8").splitlines()) <= 200
    assert not [n for n in ast.walk(ast.parse(utils.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)]
    modules = {"utils": _load("utils"), "task": _load("task")}
    named = set()
    for yaml in HARNESS.glob("*yaml"):
        named |= set(re.findall(r"!function (\w+)\.(\w+)", yaml.read_text(encoding="utf-8")))
    assert {m for m, _ in named} == {"utils", "task"}
    for module, name in sorted(named):
        assert callable(getattr(modules[module], name, None)), f"{module}.{name} named in a YAML is missing"


def test_the_spec_imports_nothing_private_and_only_the_ground_floor() -> None:
    tree = ast.parse((REPO / "fifty_shades_of_bias.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "fsb":
            assert node.module.startswith("fsb.core."), f"the spec imports {node.module}"
            assert not [a.name for a in node.names if a.name.startswith("_")], f"a private name from {node.module}"
            assert not any(part.startswith("_") for part in node.module.split("."))
        if isinstance(node, ast.Import):
            assert not [a.name for a in node.names if a.name.startswith("fsb")], "the spec imports fsb wholesale"


class _Fixed(LM):
    """Always answers position 1 as most and 4 as least, by log-likelihood."""

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        out = []
        for r in requests:
            ctx, cont = r.args
            want = " 1" if ctx.endswith("Most:") else " 4"
            out.append((0.0 if cont == want else -3.0, cont == want))
        return out

    def generate_until(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: list[Instance]) -> list[float]:
        raise NotImplementedError


def test_lm_eval_prints_no_direction_for_the_position_rates(release_dataset: Path) -> None:
    """Their reference is the uniform 0.25: lm-eval's table must not mark them lower-is-better (it printed ↓)."""
    from lm_eval.utils import make_table

    from fsb.evaluate.runner import run_eval

    results = run_eval(_Fixed(), tasks=["fsb_bws_ll"], sample=3, dataset=str(release_dataset), echo=None)
    assert all(results["higher_is_better"]["fsb_bws_ll"][f"{s}_position_{p}"] is None for s in ("best", "worst") for p in range(1, 5))
    rows: dict[str, Any] = {}
    for line in make_table(results).splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 7 and cells[5]:
            rows[cells[5]] = cells[6]
    assert {rows[f"best_position_{p}"] for p in range(1, 5)} == {""}, rows
    assert rows["pearson"] == rows["best_agreement"] == rows["parse_rate"] == "↑"


@pytest.mark.parametrize("module", ["fsb.annotate.bwsprompt", "fsb.evaluate.metrics", "fsb.evaluate.fewshot"])
def test_the_package_modules_import_without_lm_eval(module: str) -> None:
    code = f"import sys, {module}; print('lm_eval' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert done.stdout.strip() == "False"
