"""`ctxoffload ui --workdir s3://...` against the local S3 server: the page reads the bucket
through a copy, shows the objects' URIs, follows the bucket by copying it again, and leaves
no copy behind when stopped."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import tempfile
import time
import urllib.parse
from typing import Any

import pytest
from ui_running import start_ui, stop_ui

from ctxoffload import Agent, ContextConfig, ObjectStoreWorkspace, Offloader, ScriptedModel
from helpers import call
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server


def fetch_logs() -> str:
    """Fetch the night's logs."""
    return "\n".join(f"{i:05d} INFO exported ORD-{10000 + i}" for i in range(3000))


async def run_agent(ws: Offloader, session: str) -> None:
    agent = Agent(
        name="analyst",
        model=ScriptedModel([call("call_1", "fetch_logs"), "found it"]),
        offloader=ws,
        tools=[fetch_logs],
        session_id=session,
        context_config=ContextConfig(context_window=20_000, tool_result_limit=500),
    )
    await agent.reply("what failed?")


def get(port: int, token: str, route: str, **params: Any) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    query = urllib.parse.urlencode(params)
    headers = {"Host": f"127.0.0.1:{port}", "X-Ctxoffload-Token": token}
    connection.request("GET", f"{route}?{query}", headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status == 200, body
    return json.loads(body)


def listed_once(port: int, token: str, session: str) -> list[str]:
    """The sessions the page lists, once `session` is among them (60 s at most: a bound so a
    loaded machine cannot hang the suite, not a speed check)."""
    deadline = time.monotonic() + 60
    while True:
        listed = [s["session"] for s in get(port, token, "/api/sessions")["sessions"]]
        if session in listed or time.monotonic() > deadline:
            return listed
        time.sleep(0.2)


@pytest.mark.slow
def test_the_page_reads_and_follows_a_bucket(s3: S3Server) -> None:
    url = f"s3://{s3.new_bucket()}/team"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    asyncio.run(run_agent(ws, "run-1"))
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "TMPDIR": tempfile.mkdtemp(prefix="ui-bucket-"),
    }
    ui = start_ui(url, "--poll", "0.5", env=env)
    try:
        assert ui.before == [f"ctxoffload ui: {url}"]
        port, token = ui.port, ui.token

        sessions = get(port, token, "/api/sessions")
        assert sessions["workspace"] == url
        assert [s["session"] for s in sessions["sessions"]] == ["run-1"]
        session = get(port, token, "/api/session", session="run-1")
        assert session["path"] == f"{url}/sessions/run-1"
        assert [s["step"] for s in session["steps"]] == [1, 2]
        step = get(port, token, "/api/step", session="run-1", step=2)
        links = [p for m in step["messages"] for p in m["parts"] if "path" in p]
        assert {"path": "sessions/run-1/tool_result-call_1.txt"}.items() <= links[0].items()
        assert links[0]["text"] == f"{url}/sessions/run-1/tool_result-call_1.txt"
        shown = get(port, token, "/api/file", path=links[0]["path"])
        assert shown["shown_as"] == f"{url}/sessions/run-1/tool_result-call_1.txt"
        assert "ORD-10000" in shown["text"]

        asyncio.run(run_agent(ws, "run-2"))  # another agent writes while the page is open
        assert listed_once(port, token, "run-2") == ["run-1", "run-2"]
    finally:
        err = stop_ui(ui, timeout=30)
    assert ui.process.returncode == 0, err
    assert SECRET_KEY not in err
    leftovers = [n for n in os.listdir(env["TMPDIR"]) if n.startswith("ctxoffload-bucket-")]
    assert leftovers == [], "the copies of the bucket are removed when the page stops"
