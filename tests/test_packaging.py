"""Packaging: what a wheel carries (the lm-eval task inside lm-eval's tasks folder, the card template,
the top-level module), what an editable install puts where lm-eval looks, and the `build` name trap."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fifty_shades_of_bias as spec

REPO = Path(__file__).resolve().parents[1]


def _build_tree() -> set[str]:
    return {str(p.relative_to(REPO)) for p in (REPO / "build").rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str], set[str]]:
    """Build a real wheel with pip; also return the build/ tree before and after."""
    out = tmp_path_factory.mktemp("wheel")
    before = _build_tree()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("fifty_shades_of_bias-*.whl")
    return whl, before, _build_tree()


def test_wheel_carries_the_task_card_and_module(wheel: tuple[Path, set[str], set[str]]) -> None:
    whl = wheel[0]
    names = set(zipfile.ZipFile(whl).namelist())
    harness = sorted(p.name for p in (REPO / "harness").iterdir() if p.is_file())
    assert harness, "harness/ holds the task files"
    for name in harness:
        assert f"lm_eval/tasks/fsb/{name}" in names
        assert zipfile.ZipFile(whl).read(f"lm_eval/tasks/fsb/{name}") == (REPO / "harness" / name).read_bytes()
    assert "fifty_shades_of_bias.py" in names
    assert {"fsb/_dataset_card/card.md", "fsb/_dataset_card/metadata.yaml"} <= names
    modules = {f"fsb/{p.relative_to(REPO / 'build' / 'fsb').as_posix()}" for p in (REPO / "build" / "fsb").rglob("*.py")}
    assert "fsb/cli/app.py" in modules and "fsb/bws/__init__.py" in modules
    assert modules <= names, f"modules missing from the wheel: {sorted(modules - names)}"
    assert not any(n.startswith("build/") for n in names), "nothing is importable as `build` (PyPA's build tool)"
    assert not (REPO / "build" / "__init__.py").exists()


def test_backend_writes_no_build_folder_of_its_own(wheel: tuple[Path, set[str], set[str]]) -> None:
    """setuptools would write build/lib/... into build/ (our source folder); hatchling writes nothing there."""
    _, before, after = wheel
    assert after == before


def test_build_folder_is_not_ignored_by_git() -> None:
    proc = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "build/fsb/cli/app.py"], check=False)
    assert proc.returncode == 1, "build/ must not be swallowed by an ignore rule"


def test_editable_install_points_lm_eval_at_this_checkout() -> None:
    import lm_eval

    installed = Path(lm_eval.__file__).parent / "tasks" / "fsb"
    yamls = sorted(p.name for p in (REPO / "harness").glob("*.yaml"))
    assert sorted(p.name for p in installed.glob("*.yaml")) == yamls, "reinstall (pip install -e .) after adding a task file"
    for name in yamls:
        text = (installed / name).read_text()
        if text.startswith("# Stub"):
            assert f"include: {REPO / 'harness' / name}" in text
        else:
            assert text == (REPO / "harness" / name).read_text()


def test_the_module_is_not_a_loading_script(release_dataset: Path) -> None:
    """What is ours: the module defines no `datasets` builder (datasets 4+ refuses to run loading scripts),
    and a folder `fsb build` writes holds no Python file, so `load_dataset` on it reads Parquet + card."""
    import ast

    import datasets

    assert Path(spec.__file__).resolve() == REPO / "fifty_shades_of_bias.py"
    tree = ast.parse((REPO / "fifty_shades_of_bias.py").read_text(encoding="utf-8"))
    bases = {ast.unparse(b) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for b in node.bases}
    assert not {b for b in bases if "Builder" in b or "DatasetInfo" in b}, bases
    assert not list(release_dataset.rglob("*.py"))
    assert datasets.load_dataset(str(release_dataset), "default")[spec.SPLIT].num_rows == 1000


def test_editable_install_exposes_only_its_own_names(tmp_path: Path) -> None:
    """sys.path gains build/ (the fsb package) only: neither build/ nor tests/ nor harness/ is importable
    from elsewhere, and the top-level module is the checkout's file (through a shim in site-packages)."""
    code = (
        "import importlib.util, json, fifty_shades_of_bias, fsb\n"
        "print(json.dumps({'module': fifty_shades_of_bias.__file__, 'fsb': fsb.__file__,"
        " 'others': {m: bool(importlib.util.find_spec(m)) for m in ('tests', 'harness', 'hatch_build', 'dataset_card')},"
        " 'build': (lambda s: s.origin if s else None)(importlib.util.find_spec('build'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    found = __import__("json").loads(out)
    assert found["module"] == str(REPO / "fifty_shades_of_bias.py")
    assert found["fsb"] == str(REPO / "build" / "fsb" / "__init__.py")
    assert found["others"] == {"tests": False, "harness": False, "hatch_build": False, "dataset_card": False}
    assert found["build"] is None or "site-packages" in found["build"], "`build` is never this project's folder"
