"""A restarted process projects what an unbroken run projects, on every call after the
restart: each decision a projector made (a summary, a provider's compaction, a message sent
cut) is in the session's record and applied again, and what the next compaction needs to be
the unbroken run's (the files stored since the last one, what the model was last sent) is
read back too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    to_openai,
)
from ctxoffload.compression import Projector
from ctxoffload.formats.responses import from_responses
from helpers import plausible_session
from provider_shapes import OPENAI_COMPACTION_ITEM

CONFIG = ContextConfig(context_window=3000)
HERE = Path(__file__).parent


def _lines(count: int, tag: str) -> str:
    return "\n".join(f"{tag} {i}: " + "z" * 60 for i in range(count))


def history(form: str) -> list[Any]:
    """A host's history that a 3,000-token window makes the projector cut in every way it
    cuts: a result over the limit, a fresh result cut to the reserve, a long reply's text,
    a call's long argument, a long request, two summaries and (as `Msg`s) a provider's
    compaction item. `form`: `messages` (`Msg`s with ids) or `dicts` (OpenAI dicts without
    ids, known by their content)."""
    turns: list[Msg] = [Msg(role="system", content="You debug builds."), *plausible_session(24)]
    call = ToolCallBlock(id="w1", name="write_file", input={"content": _lines(90, "content")})
    turns += [
        Msg(role="user", content="dump it"),
        Msg(role="assistant", content=[ToolCallBlock(id="b1", name="dump", input={})]),
        Msg(role="tool", content=[ToolResultBlock(id="b1", name="dump", output=_lines(2000, "l"))]),
        Msg(role="assistant", content="dumped"),
        Msg(role="user", content="grep it"),
        Msg(role="assistant", content=[ToolCallBlock(id="g1", name="grep", input={})]),
        Msg(role="tool", content=[ToolResultBlock(id="g1", name="grep", output=_lines(60, "g"))]),
        Msg(role="assistant", content="grepped"),
        Msg(role="user", content="write it"),
        Msg(role="assistant", content=[TextBlock(text=_lines(80, "thought")), call]),
        Msg(role="tool", content=[ToolResultBlock(id="w1", name="write_file", output="done")]),
        Msg(role="assistant", content="wrote it"),
        Msg(role="user", content="please " + _lines(70, "request")),
        Msg(role="assistant", content="ok"),
        *plausible_session(8),
    ]
    if form == "messages":
        turns += from_responses([OPENAI_COMPACTION_ITEM])
    turns += plausible_session(16)
    named = [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(turns)]
    if form == "messages":
        return named
    return [{k: v for k, v in d.items() if k != "id"} for d in to_openai(named)]


def calls(form: str) -> list[int]:
    """The lengths of the history at each model call: after each request and each tool
    result, as a host calls its model."""
    roles = [m.role if isinstance(m, Msg) else m["role"] for m in history(form)]
    return [n for n in range(2, len(roles) + 1) if roles[n - 1] in ("user", "tool")]


async def project_calls(workdir: str, form: str, start: int) -> list[str]:
    """What one process sends from the call with `start` messages on: each request as the
    OpenAI wire has it, the workdir written `WS`. (Run by the test and by its children.)"""
    given = history(form)
    projector = Projector(LocalWorkspace(workdir), "s", config=CONFIG)
    sent = []
    for n in (n for n in calls(form) if n >= start):
        wire = json.dumps(to_openai(await projector.project(given[:n])), sort_keys=True)
        sent.append(wire.replace(workdir, "WS"))
    return sent


def _restarted(workdir: Path, form: str, start: int) -> list[str]:
    """`project_calls` in a new process."""
    code = (
        "import asyncio, json, sys\n"
        f"sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]\n"
        "from test_projection_resume import project_calls\n"
        f"print(json.dumps(asyncio.run(project_calls({str(workdir)!r}, {form!r}, {start}))))"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
    sent: list[str] = json.loads(child.stdout)
    return sent


@pytest.mark.slow
@pytest.mark.parametrize("form", ["messages", "dicts"])
async def test_every_call_after_a_restart_sends_what_an_unbroken_run_sends(
    tmp_path: Path, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A host's history grown one turn a call; a new process takes the conversation over
    at a call (after a fresh result was cut to fit, after a long reply and its call's
    argument were, after a long request was, after two summaries and a provider's
    compaction) and must send, on that call and every later one, the bytes the unbroken run
    sends. A restarted process sent the results and texts cut by a compaction whole (4.7 KB
    of a 5.6 KB request), compacted again where the unbroken run did not, and once it did,
    listed fewer files and had other messages as fresh."""
    workdir = tmp_path / "ws"
    given = history(form)
    points = calls(form)
    # The unbroken run, the session's folder kept as it was before each call.
    projector = Projector(LocalWorkspace(workdir), "s", config=CONFIG)
    unbroken = []
    for n in points:
        if workdir.exists():
            shutil.copytree(workdir, tmp_path / f"before-{n}")
        wire = json.dumps(to_openai(await projector.project(given[:n])), sort_keys=True)
        unbroken.append(wire.replace(str(workdir), "WS"))
    events = await LocalWorkspace(workdir).read_events("s")
    kinds = Counter(e["kind"] for e in events)
    assert kinds["compression"] >= 2
    assert form == "dicts" or kinds["provider_compaction"] == 1
    # Stored whole and cut: a result over the limit, a fresh one, a call's argument, a long
    # request and a long reply's text.
    stored = [p.name for p in (workdir / "sessions/s").glob("tool_result-*")]
    for cut in ("b1", "g1", "w1_content", "user-", "assistant-"):
        assert any(name.startswith(f"tool_result-{cut}") for name in stored), (cut, stored)

    # Taken over right after each kind of decision (the cuts of calls 32 and 36, the
    # summaries of 36 and 38), at a call that compacts, and after the provider's item.
    restarts = [34, 36, 38, 40, points[-6]]
    for n in restarts:
        shutil.rmtree(workdir)
        shutil.copytree(tmp_path / f"before-{n}", workdir)
        after = _restarted(workdir, form, n)
        first = points.index(n)
        differ = [
            points[first + i]
            for i, (a, b) in enumerate(zip(after, unbroken[first:], strict=True))
            if a != b
        ]
        assert not differ, (
            f"restarted at the call with {n} messages, the calls with {differ} differ"
        )


async def test_a_request_cut_before_a_restart_is_listed_by_the_summary_after_it(
    tmp_path: Path,
) -> None:
    """A long request is cut to fit (stored whole first) at a call that does not compact;
    the process ends; the next compaction, in a new process, lists the request's file among
    the offloaded files as the unbroken run's does. The record said nothing of a cut text
    (only of a cut result), so the restarted summary left it out, cut its fields otherwise
    and missed the provider's cache."""
    base = [Msg(role="system", content="s"), *plausible_session(30)]
    asked = [*base, Msg(role="user", content="please " + _lines(300, "request"))]
    histories = [base, asked, [*asked, *plausible_session(80)[1:]]]

    def neutral(messages: list[Msg], folder: Path) -> str:
        return json.dumps(to_openai(messages), sort_keys=True).replace(str(folder), "WS")

    unbroken = Projector(LocalWorkspace(tmp_path / "a"), "t", config=CONFIG)
    sent = [await unbroken.project(h) for h in histories]
    first = Projector(LocalWorkspace(tmp_path / "b"), "t", config=CONFIG)
    for history in histories[:-1]:
        await first.project(history)
    restarted = Projector(LocalWorkspace(tmp_path / "b"), "t", config=CONFIG)
    resumed = await restarted.project(histories[-1])
    kinds = [e["kind"] for e in await LocalWorkspace(tmp_path / "a").read_events("t")]
    assert kinds.count("compression") == 1 and kinds.index("compression") > kinds.index(
        "projection_cut"
    ), "the request must be cut at a call that does not compact"
    assert "tool_result-user-" in neutral(sent[-1], tmp_path / "a")
    assert neutral(resumed, tmp_path / "b") == neutral(sent[-1], tmp_path / "a")
