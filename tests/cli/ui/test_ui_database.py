"""`ctxoffload ui --workdir sqlite:///... | postgresql://...`: the page reads a database
(SQLite, and a real PostgreSQL server), shows each step with the database's references,
opens a stored file, follows a second agent's session, and leaves no copy behind."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from test_ui_bucket import get, listed_once
from test_ui_bucket import run_agent as agent_on
from ui_running import start_ui, stop_ui

from ctxoffload import SqlWorkspace


async def run_agent(url: str, session: str) -> None:
    """The bucket test's agent (`test_ui_bucket.run_agent`), on a database."""
    ws = SqlWorkspace(url)
    try:
        await agent_on(ws, session)
    finally:
        ws.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new database: a SQLite file, or a schema of its own on the test session's server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agents.db'}"
    return request.getfixturevalue("postgres").new_schema()  # type: ignore[no-any-return]


@pytest.mark.slow
def test_the_page_reads_and_follows_a_database(db_url: str) -> None:
    asyncio.run(run_agent(db_url, "run-1"))
    shown_url = SqlWorkspace(db_url).url  # as the workspace names itself (no password)
    env = {**os.environ, "TMPDIR": tempfile.mkdtemp(prefix="ui-database-")}
    ui = start_ui(db_url, env=env)
    try:
        assert ui.before == [f"ctxoffload ui: {shown_url}"]
        port, token = ui.port, ui.token

        sessions = get(port, token, "/api/sessions")
        assert [s["session"] for s in sessions["sessions"]] == ["run-1"]
        session = get(port, token, "/api/session", session="run-1")
        assert [s["step"] for s in session["steps"]] == [1, 2]
        step = get(port, token, "/api/step", session="run-1", step=2)
        links = [p for m in step["messages"] for p in m["parts"] if "path" in p]
        assert links[0]["text"] == f"{shown_url}/sessions/run-1/tool_result-call_1.txt"
        shown = get(port, token, "/api/file", path=links[0]["path"])
        assert "ORD-10000" in shown["text"]

        asyncio.run(run_agent(db_url, "run-2"))  # another agent writes while the page is open
        assert listed_once(port, token, "run-2") == ["run-1", "run-2"]
    finally:
        err = stop_ui(ui, timeout=30)
    assert ui.process.returncode == 0, err
    assert os.listdir(env["TMPDIR"]) == [], "the copies are removed when the page stops"
