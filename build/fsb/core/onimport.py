"""Run a function on a module the moment it is first imported, without importing it first.

`fsb.core.logredact.install_log_redaction` must put its redacting record factory into `logging` before any
record is made, but a `fsb score` that logs nothing should not pay for importing `logging` (and its
`traceback`, `weakref`, `string`...) at every start. `when_imported("logging", f)` calls `f(logging)` now
when it is imported, else right after it is executed by the import system and before the module is handed
to whoever imported it, so no code outside the module itself can use it unpatched. Only numpy-free stdlib
is used: this module is imported at every start.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["when_imported"]

_LOCK = threading.Lock()


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call `callback(module)` once, when the module `name` is imported (now, if it already is).

    Parameters
    ----------
    name
        An absolute module name (`"logging"`).
    callback
        Called with the module, once its own code has run; before that module is returned by `import`.
        An exception from it propagates to the import statement (the module then stays imported).
    """
    hook = _Hook(name, callback)
    with _LOCK:
        sys.meta_path.insert(0, hook)  # first the hook, then the check: an import in between meets one of them
    module = sys.modules.get(name)
    if module is not None and hook.claim():
        callback(module)


class _Hook:
    """A meta path finder for one module name: the spec the other finders give, with a loader that calls
    the callback right after the real loader has executed the module (`_ThenCall`)."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name, self.callback, self.done, self.searching = name, callback, False, False

    def claim(self) -> bool:
        """True for the one caller that gets to run the callback; the hook leaves sys.meta_path."""
        with _LOCK:
            if self.done:
                return False
            self.done = True
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            return True

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """The spec of the finders after it (another hook for the same name included), its loader wrapped."""
        if name != self.name or self.done or self.searching:
            return None
        self.searching = True  # the finders asked below may ask the whole of sys.meta_path again
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                spec = None if finder is self or find is None else find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _ThenCall(spec.loader, self)
                    return spec
            return None
        finally:
            self.searching = False


class _ThenCall:
    """A loader: the real loader executes the module, then the hook's callback gets it. The module keeps
    the real loader as its `__loader__` and `__spec__.loader` (source lines in tracebacks, reload)."""

    def __init__(self, loader: Any, hook: _Hook) -> None:
        self.loader, self.hook = loader, hook

    def create_module(self, spec: Any) -> Any:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        if self.hook.claim():
            self.hook.callback(module)
