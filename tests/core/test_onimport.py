"""fsb.core.onimport: a function runs on a module the moment it is first imported, before the importer gets it,
once, and the module is left as the import system made it (its real loader, no hook left behind)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fsb.core.onimport import when_imported


@pytest.fixture
def fresh_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module not imported yet, whose code records that it ran (`ran`) and whose value `x` a callback may patch."""
    name = f"fsb_onimport_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("ran = True\nx = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name
    sys.modules.pop(name, None)


def test_the_callback_sees_the_executed_module_before_the_importer_does(fresh_module: str) -> None:
    """The importer must get the patched module (as `logging` must have the redacting factory before any
    record is made): the callback runs after the module's code and before `import` returns, exactly once."""
    seen: list[ModuleType] = []

    def patch(module: ModuleType) -> None:
        assert module.ran  # the module's own code has run
        module.x = 2
        seen.append(module)

    hooks_before = list(sys.meta_path)
    when_imported(fresh_module, patch)
    assert fresh_module not in sys.modules and not seen  # nothing imported by asking
    module = importlib.import_module(fresh_module)
    assert module.x == 2 and seen == [module]
    assert sys.meta_path == hooks_before, "the hook leaves once it has fired"
    assert type(module.__loader__).__name__ == "SourceFileLoader" and module.__spec__.loader is module.__loader__
    importlib.reload(module)  # reloads through the real loader; the callback does not run again
    assert module.x == 1 and len(seen) == 1


def test_an_imported_module_gets_the_callback_at_once(fresh_module: str) -> None:
    module = importlib.import_module(fresh_module)
    hooks_before = list(sys.meta_path)
    got: list[ModuleType] = []
    when_imported(fresh_module, got.append)
    assert got == [module] and sys.meta_path == hooks_before


def test_two_callbacks_for_one_module_both_run(fresh_module: str) -> None:
    """Two waiting hooks for one name must not hide each other (each asks the finders after it)."""
    order: list[str] = []
    when_imported(fresh_module, lambda m: order.append("first"))
    when_imported(fresh_module, lambda m: order.append("second"))
    importlib.import_module(fresh_module)
    assert sorted(order) == ["first", "second"]
    assert not any(type(f).__name__ == "_Hook" for f in sys.meta_path)


def test_a_module_that_fails_to_import_keeps_the_hook_waiting(fresh_module: str, tmp_path: Path) -> None:
    """The callback must still run when a later import succeeds (a failed first import must not disarm it)."""
    path = tmp_path / f"{fresh_module}.py"
    path.write_text("raise ImportError('not yet')\n", encoding="utf-8")
    got: list[ModuleType] = []
    when_imported(fresh_module, got.append)
    with pytest.raises(ImportError, match="not yet"):
        importlib.import_module(fresh_module)
    assert not got
    path.write_text("x = 3\n", encoding="utf-8")
    importlib.invalidate_caches()
    sys.modules.pop(fresh_module, None)
    assert importlib.import_module(fresh_module).x == 3 and len(got) == 1
