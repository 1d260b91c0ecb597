"""The API reference (docs/api/*.md) documents every public name, once, and nothing private.

Fast and without Sphinx: the pages are read as text. Each public module's `__all__` is
compared with the autodoc directives of the pages (`.. autoclass:: ctxoffload.Agent` in an
`{eval-rst}` block), so a public name added without a reference entry fails here. A name
re-exported by several modules (`ctxoffload.Agent` is `ctxoffload.agent.Agent`) is documented
once, under one of its paths, and counts for all of them. Whether the entries render (the
docstrings parse, every reference resolves) is the docs build's job: `.ci/run` runs it with
warnings as errors (`python -m sphinx -W --keep-going -n -b html docs docs/_build/html`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import ctxoffload

API_PAGES = Path(__file__).resolve().parents[2] / "docs" / "api"

# Public modules that are not in the API reference, and why.
NOT_IN_REFERENCE = {
    # The `ctxoffload` command's entry point: the command is documented in docs/cli.md,
    # which a test checks against each command's --help.
    "ctxoffload.cli",
    # The viewer, `ctxoffload ui`: a command of the above, documented with it.
    "ctxoffload.cli.ui",
}

_DIRECTIVE = re.compile(r"^\s*\.\. (?P<kind>auto\w+):: *(?P<target>\S+)\s*$")
_OPTION = re.compile(r"^\s+:(?P<name>[\w-]+):")


def public_modules() -> list[str]:
    """`ctxoffload` and every module under it with no `_private` part in its dotted name."""
    found = ["ctxoffload"]
    for module in pkgutil.walk_packages(ctxoffload.__path__, "ctxoffload."):
        if not any(part.startswith("_") for part in module.name.split(".")):
            found.append(module.name)
    return sorted(name for name in found if name not in NOT_IN_REFERENCE)


def directives(pages: list[Path]) -> list[tuple[str, str, set[str], str]]:
    """Each autodoc directive of the pages: `(kind, target, options, where)`."""
    found: list[tuple[str, str, set[str], str]] = []
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            match = _DIRECTIVE.match(line)
            if match is None or match["kind"] == "autosummary":
                continue
            options: set[str] = set()
            for following in lines[number + 1 :]:
                option = _OPTION.match(following)
                if option is None:
                    break
                options.add(option["name"])
            found.append((match["kind"], match["target"], options, f"{page.name}:{number + 1}"))
    return found


def exported(module: ModuleType, name: str) -> Any:
    """The object `module.name`, or None where it cannot be imported here (a framework's
    class that needs the framework installed)."""
    try:
        return getattr(module, name)
    except (ImportError, ctxoffload.ConfigError):
        return None


@pytest.fixture(scope="module")
def entries() -> dict[str, str]:
    """Each documented name (`ctxoffload.Agent`), with where its directive is."""
    return {
        target: where
        for kind, target, _, where in directives(sorted(API_PAGES.glob("*.md")))
        if kind != "automodule"
    }


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_has_a_reference_entry(module_name: str, entries: dict[str, str]) -> None:
    module = importlib.import_module(module_name)
    modules = set(public_modules())
    missing = []
    for name in getattr(module, "__all__", []):
        if f"{module_name}.{name}" in entries:
            continue
        value = exported(module, name)
        elsewhere = [
            target
            for target in entries
            if target.rpartition(".")[2] == name
            and target.rpartition(".")[0] in modules
            and value is not None
            and exported(importlib.import_module(target.rpartition(".")[0]), name) is value
        ]
        if not elsewhere:
            missing.append(name)
    assert not missing, (
        f"public names of {module_name} with no entry in docs/api/*.md: {missing}; add an "
        f"autodoc directive (`.. autoclass:: {module_name}.{missing[0]}`) to the page of "
        "its package"
    )


def test_every_entry_is_a_public_name(entries: dict[str, str]) -> None:
    modules = set(public_modules())
    private = []
    for target, where in entries.items():
        module_name, _, name = target.rpartition(".")
        module = importlib.import_module(module_name) if module_name in modules else None
        if module is None or name not in getattr(module, "__all__", []):
            private.append(f"{target} ({where})")
    assert not private, f"entries for names no public __all__ lists: {private}"


def test_no_object_is_documented_under_two_names(entries: dict[str, str]) -> None:
    seen: dict[int, str] = {}
    twice = []
    for target in entries:
        module_name, _, name = target.rpartition(".")
        value = exported(importlib.import_module(module_name), name)
        if value is None or isinstance(value, (str, int, float, tuple, frozenset)):
            continue
        if id(value) in seen:
            twice.append(f"{seen[id(value)]} and {target}")
        seen[id(value)] = target
    assert not twice, f"documented twice (keep one, where users import it from): {twice}"


def test_no_name_has_two_entries() -> None:
    targets = [
        target
        for kind, target, _, _ in directives(sorted(API_PAGES.glob("*.md")))
        if kind != "automodule"
    ]
    assert sorted({t for t in targets if targets.count(t) > 1}) == []


def test_module_entries_document_no_members() -> None:
    # An automodule with members would document names a second time, past this test.
    loose = [
        f"{target} ({where})"
        for kind, target, options, where in directives(sorted(API_PAGES.glob("*.md")))
        if kind == "automodule" and "no-members" not in options
    ]
    assert not loose, f"automodule directives without :no-members: {loose}"


def test_the_reading_of_the_pages_finds_what_they_hold(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# P\n\n```{eval-rst}\n.. autoclass:: ctxoffload.Agent\n   :members:\n\n"
        ".. automodule:: ctxoffload.agent\n   :no-members:\n.. autosummary::\n\n   Agent\n```\n",
        encoding="utf-8",
    )
    assert directives([page]) == [
        ("autoclass", "ctxoffload.Agent", {"members"}, "page.md:4"),
        ("automodule", "ctxoffload.agent", {"no-members"}, "page.md:7"),
    ]
