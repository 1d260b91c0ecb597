"""The package as an index would serve it: `python -m build` makes an sdist and a wheel that
`twine check` accepts, each with what it must hold, and the wheel, installed with pip into a
fresh virtual environment, runs `ctxoffload --version` and `ctxoffload demo` from there.

These tests build and install (about 10 s together), so they share one build on one
pytest-xdist worker; `-m 'not slow'` leaves them out.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("package")]


def version() -> str:
    """The version pyproject.toml gives the package (read from src/ctxoffload/_version.py)."""
    text = (ROOT / "src" / "ctxoffload" / "_version.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    assert found is not None
    return found.group(1)


def clean_env() -> dict[str, str]:
    """This environment without what would point a child at the source tree, the venv
    running the tests or a workspace of this machine."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
        and not name.startswith("CTXOFFLOAD_")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; fail the test with its output if it fails."""
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the sdist and the wheel built from this repository (the wheel is built
    from the sdist, as `python -m build` does, so a file the sdist lacks breaks it)."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=out)
    return out


def sdist_of(dist: Path) -> Path:
    (sdist,) = dist.glob("ctxoffload-*.tar.gz")
    return sdist


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("ctxoffload-*-py3-none-any.whl")
    return wheel


def test_build_names_both_files_with_the_version(dist: Path) -> None:
    assert sorted(path.name for path in dist.iterdir()) == [
        f"ctxoffload-{version()}-py3-none-any.whl",
        f"ctxoffload-{version()}.tar.gz",
    ]


def test_twine_accepts_the_sdist_and_the_wheel(dist: Path) -> None:
    done = run(
        sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()), cwd=dist
    )
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_package_its_type_marker_and_the_license(dist: Path) -> None:
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"ctxoffload-{version()}.dist-info/METADATA").decode()
    assert {"ctxoffload/__init__.py", "ctxoffload/py.typed", "ctxoffload/cli/__init__.py"} <= names
    # `ctxoffload ui` serves its page from the package: no CDN, no build step.
    page = {f"ctxoffload/cli/ui/static/{n}" for n in ("index.html", "ui.js", "ui.css")}
    assert page <= names
    assert f"ctxoffload-{version()}.dist-info/licenses/LICENSE" in names
    assert not any(name.startswith(("tests/", "docs/", "bench/", "examples/")) for name in names)
    fields = email.parser.Parser().parsestr(metadata)
    assert fields["License-Expression"] == "MIT"
    assert fields["Requires-Python"] == ">=3.10"
    assert fields["Description-Content-Type"] == "text/markdown"
    classifiers = fields.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.10" in classifiers
    # PEP 639: a license expression replaces the license classifiers.
    assert not [c for c in classifiers if c.startswith("License ::")]
    # The index shows the README as the project's description.
    assert fields.get_payload().strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()


def _environment(python: str, platform: str, machine: str, implementation: str = "CPython") -> Any:
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": platform,
        "platform_machine": machine,
        "platform_python_implementation": implementation,
        "implementation_name": implementation.lower(),
    }


# Where rs-bpe 0.1.0 has a binary wheel (`pip download --no-deps rs-bpe` lists them), and
# where pip would build it from source with Rust.
_RS_BPE_WHEELS = [
    *(_environment(v, "linux", m) for v in ("3.10", "3.13") for m in ("x86_64", "aarch64")),
    _environment("3.12", "darwin", "arm64"),
    _environment("3.11", "darwin", "x86_64"),
    _environment("3.12", "win32", "AMD64"),
    _environment("3.10", "win32", "x86"),
]
_RS_BPE_NO_WHEEL = [
    _environment("3.14", "linux", "x86_64"),
    _environment("3.12", "linux", "armv7l"),
    _environment("3.12", "linux", "riscv64"),
    _environment("3.12", "win32", "ARM64"),
    _environment("3.10", "linux", "x86_64", implementation="PyPy"),
    _environment("3.12", "freebsd14", "amd64"),
]


def test_the_default_install_has_the_fast_counter_where_it_has_a_wheel(dist: Path) -> None:
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        metadata = wheel.read(f"ctxoffload-{version()}.dist-info/METADATA").decode()
    requires = email.parser.Parser().parsestr(metadata).get_all("Requires-Dist") or []
    (fast,) = [Requirement(r) for r in requires if r.startswith("rs-bpe") and "extra" not in r]
    assert fast.marker is not None
    assert [e for e in _RS_BPE_WHEELS if not fast.marker.evaluate(e)] == []
    assert [e for e in _RS_BPE_NO_WHEEL if fast.marker.evaluate(e)] == []


def test_the_sdist_holds_the_source_its_tests_and_its_docs(dist: Path) -> None:
    prefix = f"ctxoffload-{version()}/"
    with tarfile.open(sdist_of(dist)) as sdist:
        names = {name.removeprefix(prefix) for name in sdist.getnames()}
    for name in ("LICENSE", "README.md", "CHANGELOG.md", "CONTRIBUTING.md", "pyproject.toml"):
        assert name in names
    assert {"src/ctxoffload/py.typed", "tests/conftest.py", "examples/custom_tool.py"} <= names
    documents = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "docs").rglob("*")
        if path.is_file() and "_build" not in path.parts and "__pycache__" not in path.parts
    }
    assert documents <= names, f"missing from the sdist: {sorted(documents - names)}"
    assert not any(name.startswith((".ci/", "docs/_build/")) for name in names)
    assert not any("__pycache__" in name for name in names)


def test_the_wheel_installed_into_a_fresh_venv_runs_the_command(dist: Path, tmp_path: Path) -> None:
    """pip installs the wheel and its dependencies from the package index into a new venv;
    the `ctxoffload` script of that venv answers --version and runs the demo, importing
    the package from the venv (the working directory is not the source tree).

    The venv is made without pip of its own and this environment's pip installs into it
    (`pip --python`): the same install, without the 5 s ensurepip takes."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python, command = venv / "bin" / "python", venv / "bin" / "ctxoffload"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        wheel_of(dist),
        cwd=tmp_path,
    )

    assert run(command, "--version", cwd=tmp_path).stdout.strip() == f"ctxoffload {version()}"
    where = run(python, "-c", "import ctxoffload; print(ctxoffload.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv)
    # CPython on Linux x86_64 (what the tests run on) has rs-bpe's wheel: the default install
    # counts with it.
    counts = "from ctxoffload.tokens import TiktokenCounter; print(TiktokenCounter().source)"
    assert run(python, "-c", counts, cwd=tmp_path).stdout.startswith("rs-bpe")

    demo = run(command, "demo", "--workdir", tmp_path / "demo", cwd=tmp_path)
    assert "Answer: The nightly export failed on order ORD-58213" in demo.stdout
    assert (tmp_path / "demo" / "sessions" / "nightly-job" / "events.jsonl").is_file()
