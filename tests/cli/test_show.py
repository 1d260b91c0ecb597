"""`ctxoffload show`: a session's timeline, and any step rebuilt, from the files alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import unprivileged_prefix

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.cli import main
from helpers import SUMMARY, call, explode, fetch_log


def show(*argv: str) -> int:
    """`ctxoffload show ARGV`, in this process: its exit status."""
    return main(["show", *argv])


async def run_session(workdir: Path, steps: int = 24) -> tuple[Agent, ScriptedModel]:
    script: list[Any] = [call("c0", "explode", reason="first try")]
    script += [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(1, steps)]
    model = ScriptedModel([*script, "The export failed on a full quota."])
    agent = Agent(
        name="tester",
        system_prompt="You test things.",
        model=model,
        offloader=LocalWorkspace(workdir),
        tools=[fetch_log, explode],
        session_id="run-1",
        context_config=ContextConfig(context_window=4000, tool_result_limit=300),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
    )
    await agent.reply("why did the export fail?")
    return agent, model


@pytest.fixture
async def session(tmp_path: Path) -> tuple[Path, Agent, ScriptedModel]:
    """A recorded session of its own, for a test that damages its files."""
    workdir = tmp_path / "ws"
    agent, model = await run_session(workdir)
    return workdir, agent, model


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Agent, ScriptedModel]:
    """One recorded session shared by the tests that only read it (recording takes ~0.6 s)."""
    import asyncio

    workdir = tmp_path_factory.mktemp("show") / "ws"
    agent, model = asyncio.run(run_session(workdir))
    return workdir, agent, model


def as_sent(msgs: list[Msg]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.model_dump(mode="json")["content"]} for m in msgs]


async def test_step_json_rebuilds_what_the_model_was_sent_before_and_after_compression(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, agent, model = recorded
    assert agent.compressor.compressions >= 2
    summarised = [n for n, sent in enumerate(model.calls, start=1) if sent[1].role == "user"]
    for n in [1, 2, summarised[-1], len(model.calls)]:
        assert show("run-1", "--step", str(n), "--json", "--workdir", str(workdir)) == 0
        rebuilt = json.loads(capsys.readouterr().out)["messages"]
        assert [{"role": m["role"], "content": m["content"]} for m in rebuilt] == as_sent(
            model.calls[n - 1]
        )
    assert any("<context_summary>" in str(m["content"]) for m in rebuilt), (
        "the last step was sent a summary"
    )


async def test_timeline_shows_calls_tools_truncations_and_compressions(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, _ = recorded
    assert show("run-1", "--workdir", str(workdir)) == 0
    out = capsys.readouterr().out
    assert "model scripted" in out
    assert "step 1 · model call" in out
    assert "tool explode (c0) error: RuntimeError: boom: first try" in out
    assert "truncated fetch_log" in out and "tool_result-c1.txt" in out
    assert "compressed " in out and "context.jsonl lines 1-" in out
    assert SUMMARY["important_discoveries"] in out  # a summary field
    assert "user: why did the export fail?" in out
    assert "assistant: The export failed on a full quota." in out


async def test_full_prints_message_bodies(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, _ = recorded
    assert show("run-1", "--full", "--workdir", str(workdir)) == 0
    full = capsys.readouterr().out
    assert show("run-1", "--workdir", str(workdir)) == 0
    short = capsys.readouterr().out
    assert "00012 INFO request served" in full
    assert "00012 INFO request served" not in short


async def test_json_timeline_is_the_events(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, _ = recorded
    assert show("run-1", "--json", "--workdir", str(workdir)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["session"] == "run-1"
    assert report["events"] == await LocalWorkspace(workdir).read_events("run-1")


async def test_env_var_gives_the_workdir(
    recorded: tuple[Path, Agent, ScriptedModel],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workdir, _, _ = recorded
    monkeypatch.setenv("CTXOFFLOAD_WORKDIR", str(workdir))
    assert show("run-1", "--step", "1") == 0
    assert "You test things." in capsys.readouterr().out


def test_data_files_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workdir = tmp_path / "ws"
    session_dir = workdir / "sessions" / "s"
    (workdir / "data").mkdir(parents=True)
    session_dir.mkdir(parents=True)
    name = "ab" * 32 + ".png"
    (workdir / "data" / name).write_bytes(b"x" * 10)
    event = {"time": "t", "kind": "tool_result", "reference": "r", "note": f"data/{name}"}
    (session_dir / "events.jsonl").write_text(json.dumps(event) + "\n")
    assert show("s", "--workdir", str(workdir)) == 0
    assert f"data/{name} (10 bytes)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["nope"], 2, "no session 'nope'"),
        (["../x"], 2, "no session '../x' (a host's id, stored as 'x."),
        (["run-1", "--step", "999"], 2, "no model call at step 999"),
        (["run-1", "--step", "0"], 2, "no model call at step 0"),
    ],
)
async def test_bad_input_is_one_line_and_creates_nothing(
    recorded: tuple[Path, Agent, ScriptedModel],
    capsys: pytest.CaptureFixture[str],
    tree: Callable[[Path], Any],
    argv: list[str],
    code: int,
    says: str,
) -> None:
    workdir, _, _ = recorded
    before = tree(workdir.parent)
    assert show(*argv, "--workdir", str(workdir)) == code
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert tree(workdir.parent) == before


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("missing", "workdir {w!r} does not exist"),
        ("file", "workdir {w!r} is not a folder"),
        ("plain folder", "{w!r} is not a ctxoffload workspace (it has no sessions/ folder)"),
    ],
)
def test_a_workdir_that_is_not_a_workspace_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tree: Callable[[Path], Any],
    kind: str,
    says: str,
) -> None:
    # As every command says it (the reader's `sessions_folder` decides).
    workdir = tmp_path / "w"
    if kind == "file":
        workdir.write_text("x")
    elif kind == "plain folder":
        workdir.mkdir()
    before = tree(tmp_path)
    assert show("s", "--workdir", str(workdir)) == 2
    err = capsys.readouterr().err
    assert err == f"ctxoffload show: {says.format(w=str(workdir))}: pass --workdir DIR\n"
    assert tree(tmp_path) == before


async def test_a_corrupt_line_is_reported_with_its_number(
    session: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, _ = session
    events = workdir / "sessions" / "run-1" / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    lines.insert(3, b'{"kind": "mod\n')
    events.write_bytes(b"".join(lines))
    assert show("run-1", "--workdir", str(workdir)) == 1
    err = capsys.readouterr().err
    assert "events.jsonl line 4 is not valid JSON" in err and err.count("\n") == 1


async def test_a_torn_last_line_is_skipped(
    session: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, _ = session
    events = workdir / "sessions" / "run-1" / "events.jsonl"
    with events.open("ab") as f:
        f.write(b'{"time": "t", "kind": "mod')
    assert show("run-1", "--step", "1", "--workdir", str(workdir)) == 0


@pytest.mark.parametrize(
    "event",
    [
        {"kind": "model_call", "step": "six", "attempt": "x", "messages": 3, "error": "e"},
        {"kind": "model_call"},
        {"kind": "tool_call", "error": {"no": "type"}, "duration_ms": "slow"},
        {"kind": "message", "message": {"role": "user", "content": [1, None, {"type": "x"}]}},
        {"kind": "message", "message": "not a dict"},
        {"kind": "compression", "lines": [1]},
        {"kind": "summary", "summary": 5},
        {"kind": "session_start", "tools": "abc"},
    ],
)
@pytest.mark.parametrize("extra", [[], ["--step", "1"], ["--full"], ["--json"]])
def test_odd_but_valid_events_never_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], event: dict[str, Any], extra: list[str]
) -> None:
    session_dir = tmp_path / "sessions" / "s"
    session_dir.mkdir(parents=True)
    (session_dir / "events.jsonl").write_text(json.dumps(event) + "\n")
    assert show("s", *extra, "--workdir", str(tmp_path)) in (0, 1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 1


async def test_a_step_whose_message_is_missing_from_the_record_is_a_problem(
    session: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, _, model = session
    events = workdir / "sessions" / "run-1" / "events.jsonl"
    system_id = model.calls[0][0].id
    kept = [
        line
        for line in events.read_text().splitlines(keepends=True)
        if system_id not in line or '"kind":"model_call"' in line
    ]
    events.write_text("".join(kept))
    assert show("run-1", "--step", "1", "--workdir", str(workdir)) == 1
    err = capsys.readouterr().err
    assert f"message {system_id}, which the record does not hold" in err


def test_the_ctxoffload_command_runs_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "nope", "--workdir", str(tmp_path / "absent")]) == 2
    assert "ctxoffload show" in capsys.readouterr().err


async def test_a_workdir_given_before_the_command_is_used(
    recorded: tuple[Path, Agent, ScriptedModel],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    workdir, _, _ = recorded
    monkeypatch.chdir(tmp_path)  # not a workspace: only --workdir can find it
    assert main(["--workdir", str(workdir), "show", "run-1", "--step", "1"]) == 0
    assert "You test things." in capsys.readouterr().out


async def test_each_summary_is_printed_once_after_its_compression(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, agent, _ = recorded
    assert show("run-1", "--workdir", str(workdir)) == 0
    lines = capsys.readouterr().out.splitlines()
    compressions = [i for i, line in enumerate(lines) if " compressed " in line]
    assert len(compressions) == agent.compressor.compressions >= 2
    fields = [line for line in lines if line.startswith("      task_overview: ")]
    assert len(fields) == len(compressions)
    for i in compressions:
        # Where the messages went, the compression's fidelity report, who wrote the summary,
        # then the summary.
        assert " moved to context.jsonl lines " in lines[i + 1]
        assert " artifacts: " in lines[i + 2]
        assert "messages read back at their lines" in lines[i + 3]
        assert lines[i + 4].endswith("   summary: scripted, structured")
        assert "summary message " in lines[i + 5]
        assert lines[i + 6] == f"      task_overview: {SUMMARY['task_overview']}"
    assert not any(line.endswith(" summary:") for line in lines)


async def test_full_prints_each_summarys_fields_once(
    recorded: tuple[Path, Agent, ScriptedModel], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir, agent, _ = recorded
    assert show("run-1", "--full", "--workdir", str(workdir)) == 0
    out = capsys.readouterr().out
    # The message whole, as the model saw it: the five fields are in it.
    assert out.count(SUMMARY["task_overview"]) == agent.compressor.compressions
    assert out.count("<context_summary>") == agent.compressor.compressions
    assert "task_overview: " not in out


def test_a_summary_without_its_message_is_printed_after_its_compression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Compressor without an Agent (replay, a pipeline) records no message events.
    session_dir = tmp_path / "sessions" / "s"
    session_dir.mkdir(parents=True)
    events = [
        {"time": "2026-01-01T10:00:00", "kind": "summary", "summary": SUMMARY},
        {"time": "2026-01-01T10:00:01", "kind": "compression", "messages": 4, "lines": [1, 4]},
    ]
    (session_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert show("s", "--workdir", str(tmp_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    # No Agent and no door wrote it, and show says what that means for the record.
    assert lines[1].startswith("no Agent or door began this record")
    assert "compressions only" in lines[1] and len(lines[1]) <= 80
    assert lines[2].startswith("10:00:01 compressed 4 messages")
    assert lines[3] == "10:00:01   moved to nowhere (no offloader) lines 1-4"
    assert lines[4] == "10:00:00   summary:"
    assert lines[5] == f"      task_overview: {SUMMARY['task_overview']}"
    assert len(lines) == 10


@pytest.mark.parametrize("damage", ["chmod 000", "hard link"])
def test_an_unreadable_record_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    import os
    import subprocess
    import sys

    session_dir = tmp_path / "ws" / "sessions" / "s"
    session_dir.mkdir(parents=True)
    events = session_dir / "events.jsonl"
    events.write_text('{"kind": "session_start"}\n')
    if damage == "hard link":
        os.link(events, tmp_path / "elsewhere.jsonl")
    else:
        events.chmod(0)
        prefix = unprivileged_prefix()  # root reads a chmod-000 file: drop that power
        argv = ["show", "s", "--workdir", str(tmp_path / "ws")]
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "ctxoffload", *argv], capture_output=True, text=True
        )
        assert done.returncode == 2, done
        assert done.stderr == f"ctxoffload show: cannot read {events}: Permission denied\n"
        return
    assert show("s", "--workdir", str(tmp_path / "ws")) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ctxoffload show: {events}: has 2 hard links: it may be shared with a file outside "
        "the workspace; not read\n"
    )


def test_a_planted_link_in_place_of_the_record_is_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As every command passes it over (`ctxoffload verify` reports it): nothing of the file
    # it points to is shown.
    session_dir = tmp_path / "ws" / "sessions" / "s"
    session_dir.mkdir(parents=True)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"kind": "session_start", "agent": "SECRET"}\n')
    (session_dir / "events.jsonl").symlink_to(outside)
    assert show("s", "--workdir", str(tmp_path / "ws")) == 0
    captured = capsys.readouterr()
    assert "SECRET" not in captured.out and captured.err == ""
    assert "no record: events.jsonl is missing or empty" in captured.out


def test_no_such_session_names_the_workspace_by_its_absolute_path(
    recorded: tuple[Path, Agent, ScriptedModel],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workdir, _, _ = recorded
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    for argv in (["show", "nope"], ["show", "nope", "--workdir", "."]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ctxoffload show: no session 'nope' in {str(workdir)!r}"), err
    # as the other commands say it
    assert main(["stats", "nope"]) == 2
    assert f"no session 'nope' in {str(workdir)!r}" in capsys.readouterr().err


def test_show_json_spells_numbers_json_cannot_as_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record may hold NaN or Infinity (Python's json writes and reads them); `--json`
    prints what any parser takes (jq, JSON.parse), as the viewer sends it."""
    import asyncio

    from ctxoffload import LocalWorkspace

    workdir = tmp_path / "ws"
    asyncio.run(
        LocalWorkspace(workdir).record_event(
            "s", "note", ratio=float("nan"), high=float("inf"), low=float("-inf")
        )
    )
    assert main(["show", "s", "--json", "--workdir", str(workdir)]) == 0

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    printed = json.loads(capsys.readouterr().out, parse_constant=refuse)
    [event] = [e for e in printed["events"] if e["kind"] == "note"]
    assert (event["ratio"], event["high"], event["low"]) == ("NaN", "Infinity", "-Infinity")


def test_show_without_a_session_shows_the_newest(
    filled: Path, cli: Callable[..., Any], tmp_path: Path
) -> None:
    import os
    from datetime import datetime, timezone

    # Aged by their record's clock (each event's time), which `ls` orders by, and their
    # files alike.
    for session, when in (("run-1", 1_000_000_000), ("run-2", 1_700_000_000)):
        folder = filled / "sessions" / session
        events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
        stamp = datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="milliseconds")
        lines = "".join(json.dumps({**event, "time": stamp}) + "\n" for event in events)
        (folder / "events.jsonl").write_text(lines)
        for file in folder.iterdir():
            os.utime(file, (when, when))
    newest = cli("show", "--workdir", filled)
    assert newest.code == 0, newest.err
    assert newest.out == cli("show", "run-2", "--workdir", filled).out
    assert newest.err == "ctxoffload show: the newest session of 2 is run-2 (ls lists them)\n"
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    with open(filled / "sessions/run-1/events.jsonl", "a") as record:  # written to now
        record.write(json.dumps({"time": now, "kind": "note", "text": "again"}) + "\n")
    assert cli("show", "--workdir", filled).out.startswith("session run-1 ")
    listed = json.loads(cli("ls", "--json", "--workdir", filled).out)
    assert [row["session"] for row in listed] == ["run-1", "run-2"]
    # --step and --json take the newest too.
    assert json.loads(cli("show", "--json", "--workdir", filled).out)["session"] == "run-1"
    empty = tmp_path / "empty"
    (empty / "sessions").mkdir(parents=True)
    none = cli("show", "--workdir", empty)
    assert (none.code, none.out) == (2, "")
    assert none.err == (
        f"ctxoffload show: no session in {str(empty)!r} yet: pass a SESSION, or run an agent "
        "first\n"
    )


def test_show_opens_the_session_ls_lists_first_within_one_second(
    filled: Path, cli: Callable[..., Any]
) -> None:
    """Two sessions active within one second: `ls` (to the second) listed run-1 first, and
    `show` opened run-2, the later by a fraction, saying it was the first `ls` lists."""
    import os

    for session, when in (("run-1", 1_700_000_000.1), ("run-2", 1_700_000_000.8)):
        for file in (filled / "sessions" / session).iterdir():
            os.utime(file, (when, when))
    listed = cli("ls", "--json", "--workdir", filled)
    first = json.loads(listed.out)[0]["session"]
    shown = cli("show", "--workdir", filled)
    assert shown.err == f"ctxoffload show: the newest session of 2 is {first} (ls lists them)\n"
    assert shown.out.startswith(f"session {first} ")


OLD_RECORD = Path(__file__).parent.parent / "_disk" / "data" / "events-24678e9.jsonl"


@pytest.mark.parametrize("extra", [[], ["--full"]])
def test_show_words_every_line_an_older_and_a_newer_release_wrote(
    tmp_path: Path, cli: Callable[..., Any], extra: list[str]
) -> None:
    # Lines of 24678e9 (before event records), then a newer writer's kind and fields: each
    # is a sentence, none falls back to its raw JSON.
    session_dir = tmp_path / "sessions" / "old"
    session_dir.mkdir(parents=True)
    newer = [
        {"time": "2026-12-01T00:00:01.000Z", "kind": "handoff", "to": "b"},
        {
            "time": "2026-12-01T00:00:02.000Z",
            "kind": "pin",
            "message_id": "m1",
            "role": "user",
            "by": "api",
            "pinned_tokens_before": 0,
            "pinned_tokens_after": 5,
            "shape": [1],
        },
    ]
    with_newer = OLD_RECORD.read_text() + "".join(json.dumps(e) + "\n" for e in newer)
    (session_dir / "events.jsonl").write_text(with_newer)
    shown = cli("show", "old", *extra, "--workdir", tmp_path)
    assert shown.code == 0, shown.err
    assert '{"' not in shown.out and "Traceback" not in shown.err
    for said in (
        "truncated fetch_log ",
        "compressed ",
        "pinned message ",
        "unpinned message ",
        "compacted on the agent's request",
        "stored a data file (image/png, 12 bytes)",
        "00:00:01 handoff",
        "pinned message m1 (user, by api): pins 0→5 tokens",
    ):
        assert said in shown.out, said


# -- a session's lines at 80 columns, and the opening line of every door --------------------


def _door_session(workdir: Path, door: str) -> None:
    """A session a door wrote: its `door` event, then one tool result the workspace stored."""
    import asyncio

    from ctxoffload._doors.doors import DOORS
    from ctxoffload._doors.opening import record_door

    async def write() -> None:
        ws = LocalWorkspace(workdir, fsync=False)
        await record_door(ws, DOORS[door], door, "team/alice:42")
        await ws.offload_tool_result(door, {"id": "call_1", "name": "ls", "output": "x\n" * 50})

    asyncio.run(write())


@pytest.mark.parametrize(
    "door",
    [
        "langchain",
        "deepagents",
        "pydantic-ai",
        "openai-agents",
        "strands",
        "strands-storage",
        "agentscope",
        "claude-code",
        "claude-agent-sdk",
        "mcp-proxy",
    ],
)
def test_a_door_session_opens_with_two_short_true_lines(
    tmp_path: Path, cli: Callable[..., Any], door: str
) -> None:
    """Which conversation ran, by which host and adapter, then what that door records, each
    within 80 columns; a stored result is shown unless the door names its files in lines of its own
    (a door that projects), never hidden for a door whose stored files are its record."""
    from ctxoffload._doors.doors import DOORS

    _door_session(tmp_path, door)
    lines = cli("show", door, "--workdir", tmp_path).out.splitlines()
    first, then = lines[1], lines[2]
    expected = f" run of 'team/alice:42' by {DOORS[door].host} ({DOORS[door].adapter})"
    assert first.endswith(expected), first
    assert then.endswith(f"   it records {DOORS[door].records}"), then
    assert max(len(first), len(then)) <= 80, (first, then)
    stored = [line for line in lines if "stored the whole result of ls" in line]
    assert len(stored) == (0 if DOORS[door].projects else 1), lines
    if stored:
        assert stored[0].endswith(" in tool_result-call_1.txt"), stored


def test_counts_read_as_words_and_names_are_quoted(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """`1 message`, not `1 messages`; an agent called `agent` is `agent 'agent'`; a cut whose
    last line shows in part says so."""
    import asyncio

    from ctxoffload import Agent, ScriptedModel

    def fetch() -> str:
        """Fetch one long line and one short."""
        return "x" * 6000 + "\nthe end\n"

    async def run() -> None:
        model = ScriptedModel([call("c1", "fetch"), "done"])
        async with Agent(
            model=model,
            tools=[fetch],
            offloader=LocalWorkspace(tmp_path, fsync=False),
            context_config=ContextConfig(tool_result_limit=200),
            session_id="words",
        ) as agent:
            await agent.reply("go")

    asyncio.run(run())
    out = cli("show", "words", "--workdir", tmp_path).out
    assert " session started: agent 'agent', model scripted\n" in out
    assert " · 1 message · " in out and " 1 messages" not in out
    assert ", part of line 1 of 2 shown\n" in out, out
    assert "     whole output in tool_result-c1.txt\n" in out
