"""`ctxoffload ui` as users run it: a real server process on 127.0.0.1, the demo's workspace,
and a real headless Chromium driven by Playwright."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_running import Ui, chromium_path, start_ui, stop_ui


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace `ctxoffload demo` leaves, made once by the real command."""
    workdir = tmp_path_factory.mktemp("ui-demo") / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "demo", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return workdir


@pytest.fixture
def own_demo(demo_workspace: Path, tmp_path: Path) -> Path:
    """A copy of the demo's workspace this test may add to."""
    copy = tmp_path / "demo"
    shutil.copytree(demo_workspace, copy, symlinks=True)
    return copy


@pytest.fixture
def ui(demo_workspace: Path) -> Iterator[Ui]:
    """`ctxoffload ui` on the demo's workspace."""
    running = start_ui(demo_workspace)
    yield running
    stop_ui(running)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system's packages, through Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: pip install -e '.[test]' (it is in the test extra)")
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A new page; the test fails on any script error the page raises."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], f"the page raised: {errors}"
