"""hatchling build hook: install the lm-eval task folder (harness/) where lm-eval looks for tasks, and,
for an editable install, the top-level module without putting the checkout's root on sys.path.

lm-eval 0.4.13 has no plugin mechanism; its CLI indexes every YAML under its own `lm_eval/tasks/`.
A regular wheel therefore carries harness/ as `lm_eval/tasks/fsb/` (see force-include in
pyproject.toml): pip records those files, so uninstalling removes them. An editable install instead
gets one stub YAML per task that `include:`s the task file in this checkout by absolute path, so edits
to harness/ take effect without reinstalling; lm-eval resolves `!function utils.*` next to the real
file. Adding or renaming a task YAML needs `pip install -e .` again.

An editable install adds only build/ (the `fsb` package) to sys.path, never the checkout's root, so
nothing there (build/, tests/, harness/) becomes importable by accident. The top-level module
`fifty_shades_of_bias` is reached through a small shim in site-packages that loads the checkout's file.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_SHIM = """\
# Written by an editable install of fifty-shades-of-bias: this module is the checkout's file, loaded in
# place of this one (so edits there take effect at once).
import importlib.util as _util
import sys as _sys

_spec = _util.spec_from_file_location(__name__, {path!r})
_module = _util.module_from_spec(_spec)
_sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
"""


class CustomBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "editable":
            return
        root = Path(self.root).resolve()
        self._stubs = Path(tempfile.mkdtemp(prefix="fsb-editable-"))
        note = self._stubs / "README.md"
        note.write_text(f"Stubs of an editable install: the fsb task files live in {root / 'harness'}.\n", encoding="utf-8")
        # Never empty: an empty map would make hatchling fall back to copying the force-include list.
        forced: dict[str, str] = {str(note): "lm_eval/tasks/fsb/README.md"}
        for task in sorted((root / "harness").glob("*.yaml")):
            stub = self._stubs / task.name
            stub.write_text(
                f"# Stub written by an editable install of fifty-shades-of-bias: the task lives in the checkout.\ninclude: {task}\n",
                encoding="utf-8",
            )
            forced[str(stub)] = f"lm_eval/tasks/fsb/{task.name}"
        shim = self._stubs / "fifty_shades_of_bias.py"
        shim.write_text(_SHIM.format(path=str(root / "fifty_shades_of_bias.py")), encoding="utf-8")
        forced[str(shim)] = "fifty_shades_of_bias.py"
        build_data["force_include_editable"] = forced

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        stubs = getattr(self, "_stubs", None)
        if stubs is not None:
            shutil.rmtree(stubs, ignore_errors=True)
