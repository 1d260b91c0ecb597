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

BROWSER = "browser"
"""The fixture every browser test uses (through `page` or on its own)."""

NAN = float("nan")
INF = float("inf")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A browser test looks for Chromium before any of its fixtures is set up: without it,
    it skips, or fails where CI=true (ui_running.chromium_path)."""
    if BROWSER in getattr(item, "fixturenames", ()):
        chromium_path(f"the browser tests of {item.nodeid.split('::')[0]}")


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
def odd_numbers(tmp_path: Path) -> Path:
    """A workspace whose record holds numbers JSON has no spelling for, as the workspace
    writes a float that is not finite (the token NaN, Infinity or -Infinity, which Python's
    json reads back): session `odd-numbers`, one model call."""
    import asyncio
    import concurrent.futures

    from ctxoffload import LocalWorkspace

    async def record() -> None:
        workspace = LocalWorkspace(tmp_path / "ws", fsync=False)
        await workspace.initialize()
        session = "odd-numbers"
        message = {"id": "m1", "role": "user", "content": "hello", "metadata": {"score": NAN}}
        await workspace.record_event(
            session,
            "session_start",
            agent="odd",
            context_window=4000,
            config={"trigger_ratio": INF},
        )
        await workspace.record_event(session, "message", message=message)
        await workspace.record_event(
            session,
            "model_call",
            step=1,
            messages=["m1"],
            context_window=NAN,
            tokens_counted=INF,
            input_tokens=-INF,
            window={"messages": 12},
        )
        await workspace.offload_context(session, msgs=[message])

    # A browser test's Playwright runs an event loop in this thread: record in another.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, record()).result()
    return tmp_path / "ws"


@pytest.fixture
def ui(demo_workspace: Path) -> Iterator[Ui]:
    """`ctxoffload ui` on the demo's workspace."""
    running = start_ui(demo_workspace)
    yield running
    stop_ui(running)


@pytest.fixture(scope="module", name=BROWSER)
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
