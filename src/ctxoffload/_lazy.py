"""Lazy re-exports for the package's `__init__` modules.

A package's public names are imported from their modules on first use, so `import ctxoffload`
(or `import ctxoffload.cli`, which imports the package first) loads neither pydantic, the
tokenizer, nor any optional client until a name that needs them is touched.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs ~8 ms of every start-up
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build a package's module-level `__getattr__` and `__dir__`.

    Args:
        package: the package's `__name__`, the anchor for relative module names.
        namespace: the package's `globals()`; a name, once imported, is stored there so
            later lookups cost nothing.
        exports: public name -> module (relative, such as ``"._local"``) that defines it.

    Returns:
        `(__getattr__, __dir__)` for the package to assign.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # (`importlib` is imported here, not with the package: with `warnings` it costs ~1 ms
        # of every `ctxoffload` command's start-up, where a plain `grep` reads no lazy name.)
        import importlib

        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    # Which module each name comes from, for tools that check the exports (the tests import
    # each module first in a fresh interpreter).
    __getattr__.exports = dict(exports)  # type: ignore[attr-defined]
    return __getattr__, __dir__
