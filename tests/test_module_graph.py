"""The package's modules load in any order: no import cycle, and every public name imports first.

A cycle hides while some other module happens to be imported first (the suite imports many),
so both checks start from nothing: the first walks the source, the second imports each public
name as the first thing a fresh interpreter does.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIRST_IMPORTS, first_import_failures, public_names

SRC = Path(importlib.util.find_spec("ctxoffload").origin).parent  # type: ignore[arg-type, union-attr]

# Every package with a public `__all__`; the integrations need their framework installed.
PACKAGES = [
    "ctxoffload",
    "ctxoffload.agent",
    "ctxoffload.compression",
    "ctxoffload.eval",
    "ctxoffload.formats",
    "ctxoffload.mcp",
    "ctxoffload.readback",
    "ctxoffload.workspace",
]
INTEGRATIONS = {
    "ctxoffload.integrations.agentscope": "agentscope",
    "ctxoffload.integrations.langchain": "langchain",
    "ctxoffload.integrations.strands": "strands",
    "ctxoffload.integrations.deepagents": "deepagents",
    "ctxoffload.integrations.pydantic_ai": "pydantic_ai",
    "ctxoffload.integrations.openai_agents": "openai_agents",
    "ctxoffload.integrations.claude": "claude",
    "ctxoffload.integrations.smolagents": "smolagents",
    "ctxoffload.integrations.haystack": "haystack",
    "ctxoffload.integrations.google_adk": "google.adk",
    "ctxoffload.integrations.llama_index": "llama_index.core",
    "ctxoffload.integrations.crewai": "crewai",
}
EXTRAS = {"google.adk": "google-adk", "llama_index.core": "llama-index"}
"""The extra of a framework whose import name is not its extra's."""


SOURCE_PARSED_ONCE = pytest.mark.xdist_group("source-imports")
"""The checks that read every source file's imports run on one worker, which parses once."""


@functools.cache
def import_statements(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The import statements of a source file, wherever they stand in it: parsed once for
    all the checks of a test run (the source does not change under it)."""
    tree = ast.parse(path.read_text(), str(path))
    return tuple(node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package under `root`, with the package modules it imports.

    Every import statement counts: at the top, inside a function, under `TYPE_CHECKING`.
    `from package import name` is an edge to the module `name` when it is one, else to the
    package (whose `__init__` is run).
    """
    modules: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in import_statements(path):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{alias.name}"
                    if f"{source}.{alias.name}" in modules
                    else known(source)
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t is not None and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.slow
@SOURCE_PARSED_ONCE
def test_the_source_has_no_import_cycle() -> None:
    graph = module_graph(SRC)
    assert len(graph) > 50  # the walk found the package
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .sub import b\n")
    (package / "sub" / "b.py").write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .. import a\n"
    )
    assert cycles(module_graph(package)) == [["pkg.a", "pkg.sub.b"]]


@pytest.mark.slow
@SOURCE_PARSED_ONCE
def test_the_pillars_import_no_front() -> None:
    """The pillars (`_disk`, workspace, readback, compression) never import the agent, the CLI
    or an integration; workspace imports neither readback nor compression; the private disk
    core `_disk` imports no other pillar, so every pillar can stand on it (DESIGN.md section 1)."""
    graph = module_graph(SRC)
    fronts = ("ctxoffload.agent", "ctxoffload.cli", "ctxoffload.integrations", "ctxoffload.mcp")
    above_workspace = ("ctxoffload.readback", "ctxoffload.compression", *fronts)
    above_disk = ("ctxoffload.workspace", *above_workspace)
    wrong = []
    for module, imported in graph.items():
        for target in imported:
            pillar = module.split(".")[1] if module.count(".") else ""
            if pillar in ("_disk", "workspace", "readback", "compression") and target.startswith(
                fronts
            ):
                wrong.append((module, target))
            if pillar == "workspace" and target.startswith(above_workspace):
                wrong.append((module, target))
            if pillar == "_disk" and target.startswith(above_disk):
                wrong.append((module, target))
    assert wrong == []


def command_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Each import of a command module (`cli/_cmd_*.py`) by a module of the package: the
    command line loads them by name (`cli/__init__.py`), and nothing else may (the viewer
    and the commands share the session-view layer, `cli/_view/`, instead)."""
    return sorted(
        (module, target)
        for module, imported in graph.items()
        for target in imported
        if target.rpartition(".")[2].startswith("_cmd_") and not module.endswith("._cmd_ui")
    )


@SOURCE_PARSED_ONCE
def test_neither_the_viewer_nor_a_command_imports_a_command() -> None:
    assert command_imports(module_graph(SRC)) == []


def test_the_command_import_check_finds_the_viewer_importing_a_command(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "ui").mkdir(parents=True)
    for name in ("__init__.py", "_cmd_ls.py", "_cmd_ui.py", "ui/__init__.py"):
        (package / name).write_text("")
    (package / "ui" / "_model.py").write_text("def rows():\n    from .._cmd_ls import run\n")
    assert command_imports(module_graph(package)) == [("pkg.ui._model", "pkg._cmd_ls")]


@pytest.mark.slow
@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports_first_in_a_fresh_interpreter(package: str) -> None:
    names = public_names(package)
    assert names
    assert first_import_failures(names) == {}


def test_the_first_import_check_reports_a_name_that_fails(tmp_path: Path) -> None:
    (tmp_path / "broken_pkg").mkdir()
    (tmp_path / "broken_pkg" / "__init__.py").write_text(
        "__all__ = ['x']\nraise ImportError('boom')\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        code = FIRST_IMPORTS.replace(
            "import json, os, sys, traceback",
            f"import json, os, sys, traceback\nsys.path.insert(0, {str(tmp_path)!r})",
        )
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps([["broken_pkg", ["x"]]])],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        sys.path.remove(str(tmp_path))
    assert json.loads(done.stdout) == {"from broken_pkg import x": "ImportError: boom"}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(INTEGRATIONS))
def test_an_integration_imports_first_or_names_its_extra(module: str) -> None:
    """With its framework installed every public name imports first; without it, a name that
    needs the framework says which extra to install."""
    framework = INTEGRATIONS[module]
    failures = first_import_failures(public_names(module))
    if installed(framework):
        assert failures == {}
    else:
        # The extra's name as pip normalises it.
        extra = EXTRAS.get(framework, framework.replace("_", "-"))
        assert all(f"ctxoffload[{extra}]" in line for line in failures.values()), failures


def installed(module: str) -> bool:
    """Whether `module` can be imported here (a dotted name whose parent is missing is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def private_imports(root: Path) -> list[str]:
    """Imports that reach past a package's exports: an underscore name from another module, a
    name from a private module of another package (a module of a package may use its own
    package's private modules; the top-level private modules belong to the whole package), or
    a name from inside a room (a private subpackage of a package, such as
    `compression._index`) by a module outside it, which enters by the room's face."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        package = module if is_package else module.rpartition(".")[0]
        for node in import_statements(path):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if source.split(".")[0] != root.name:
                continue
            names = [alias.name for alias in node.names]
            shown = f"{module}: from {source} import {', '.join(names)}"
            if any(name.startswith("_") and name != "__version__" for name in names):
                wrong.append(shown)
                continue
            steps = source.split(".")
            rooms = [
                ".".join(steps[: at + 1])
                for at, step in enumerate(steps[:-1])
                if at >= 2 and step.startswith("_")
            ]
            if any(module != room and not module.startswith(room + ".") for room in rooms):
                wrong.append(shown)
                continue
            private_at = next((i for i, step in enumerate(steps) if step.startswith("_")), None)
            if private_at is None or private_at == 1:
                continue  # a public module, or a top-level private module of the package
            owner = ".".join(steps[:private_at])
            if not (module == owner or module.startswith(owner + ".")):
                wrong.append(shown)
    return wrong


@SOURCE_PARSED_ONCE
def test_no_module_reaches_past_another_packages_exports() -> None:
    assert private_imports(SRC) == []


def test_the_export_check_finds_what_reaches_past(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for folder in (package / "a", package / "b"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "_shared.py").write_text("X = 1\n")
    (package / "a" / "_impl.py").write_text("Y = 1\n_Z = 2\n")
    (package / "a" / "own.py").write_text("from ._impl import Y\nfrom .._shared import X\n")
    (package / "b" / "user.py").write_text(
        "from ..a._impl import Y\nfrom ..a.own import _Z\nfrom ..a import own\n"
    )
    # A room of `a`: its own modules and its face are open to `a`, its inside is not.
    (package / "a" / "_room").mkdir()
    (package / "a" / "_room" / "__init__.py").write_text("from ._inner import W\n")
    (package / "a" / "_room" / "_inner.py").write_text("from .._impl import Y\nW = Y\n")
    (package / "a" / "core.py").write_text("from ._room import W\nfrom ._room._inner import W\n")
    assert private_imports(package) == [
        "pkg.a.core: from pkg.a._room._inner import W",
        "pkg.b.user: from pkg.a._impl import Y",
        "pkg.b.user: from pkg.a.own import _Z",
    ]


# How many names each package face may export. A face is a list a user reads in a minute;
# raising a number here is a decision, taken in a commit of its own, with a reference entry
# for every new name (tests/docs/test_docs_build.py holds each face to its reference page).
FACE_BUDGET = {
    "ctxoffload": 53,  # + SqlWorkspace (issue 48)
    "ctxoffload.agent": 16,  # WINDOW_PARTS went private: window_parts' keys say it
    # Issue 59: the split functions, the notes' tests, the placeholders' keys (now
    # `METADATA_KEY` on their managers) and the extractive summary went private.
    "ctxoffload.compression": 35,
    # Issue 82: `ctxoffload eval` as one function; its probes without a model are
    # `evaluate(..., model=None)`, not a name of their own.
    "ctxoffload.eval": 1,
    "ctxoffload.formats": 10,
    "ctxoffload.readback": 11,  # + memory_tool (issue 46)
    # Issue 59: the writer's identity and the id check are _disk's, the refusal of what is
    # not a capability is the doors' (_doors/checks.py).
    "ctxoffload.workspace": 25,
}


# The 120 of issue 80: ctxoffload.eval's one name (`evaluate`; its probes alone are
# model=None) came in as WINDOW_PARTS went private (window_parts' keys say it).
DISTINCT_NAMES = 120
"""How many distinct names the faces export together (a name on two faces counts once)."""


def test_the_faces_together_stay_within_their_budget() -> None:
    names = {name for package in PACKAGES for _, name, _ in public_names(package)}
    assert len(names) <= DISTINCT_NAMES, f"{len(names)} distinct public names"


@pytest.mark.parametrize("package", sorted(FACE_BUDGET))
def test_a_face_stays_within_its_budget(package: str) -> None:
    names = public_names(package)
    assert len(names) <= FACE_BUDGET[package], (
        f"{package} exports {len(names)} names, its budget is {FACE_BUDGET[package]}: plumbing "
        "belongs in ctxoffload._disk or a private module, imported directly"
    )


MODULE_LINES = 800
"""How long a module of the package may be: a file that needs more holds more than one idea
(STYLE.md); past it, a cohesive part moves to a module of its own."""


def test_no_module_of_the_package_is_over_its_line_budget() -> None:
    over = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert over == {}, f"modules over {MODULE_LINES} lines: {over}"


# A rule that spans packages has one home (issue 59): the text that writes it appears in that
# module and nowhere else in the source; every other place calls the home.
ONE_HOME = {
    "st_nlink": "_disk/paths.py",  # the hard-link rule and the words of its refusal
    "[0-9a-f]{64}": "_disk/layout.py",  # a data/ file's name
    "[A-Za-z0-9._-]{0,127}": "_disk/ids.py",  # a plain session id
    # a file the workspace stored, to the artifact index: what the session's record says
    "EventKind.OFFLOAD: (": "compression/_stored_files.py",
    # a value written whole, not as a piece of a longer one, to the artifact index
    "_COMMAND_STOPS": "compression/_index/_whole.py",
}


@pytest.mark.parametrize("text", sorted(ONE_HOME))
def test_a_rule_is_written_in_its_home_only(text: str) -> None:
    found = sorted(
        str(path.relative_to(SRC)) for path in SRC.rglob("*.py") if text in path.read_text()
    )
    assert found == [ONE_HOME[text]]
