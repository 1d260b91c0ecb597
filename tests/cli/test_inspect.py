"""`ls`, `cat` and `stats` on a real workspace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_workspace import FAILING_LINE, PNG


def test_ls_lists_sessions_with_their_counts(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("ls", "--workdir", filled, "--json")
    assert result.code == 0
    rows = {r["session"]: r for r in json.loads(result.out)}
    assert set(rows) == {"run-1", "run-2"}
    one = rows["run-1"]
    assert one["tool_results"] == 2
    assert one["message_lines"] == 4
    assert one["compressions"] == 1
    assert one["steps"] == 4  # from state.json
    assert one["bytes"] == sum(p.stat().st_size for p in (filled / "sessions/run-1").iterdir())
    assert rows["run-2"]["message_lines"] == 0 and rows["run-2"]["steps"] is None


def test_ls_prints_a_plain_table_when_piped(filled: Path, cli: Callable[..., Any]) -> None:
    out = cli("ls", "--workdir", filled).out.splitlines()
    assert out[0].split()[:3] == ["session", "last", "activity"]
    assert any(line.startswith("run-1 ") for line in out)
    assert "\x1b[" not in "".join(out)


def test_ls_of_an_empty_workspace(tmp_path: Path, cli: Callable[..., Any]) -> None:
    (tmp_path / "sessions").mkdir()
    result = cli("ls", "--workdir", tmp_path)
    assert result.code == 0 and "no sessions" in result.out


def test_cat_numbers_lines_and_takes_a_range(filled: Path, cli: Callable[..., Any]) -> None:
    ref = filled / "sessions/run-1/tool_result-call_1.txt"
    result = cli("cat", ref, "--lines", f"{FAILING_LINE}:{FAILING_LINE + 1}", "--workdir", filled)
    assert result.code == 0
    lines = result.out.splitlines()
    assert len(lines) == 2
    assert lines[0].split("\t")[0].strip() == str(FAILING_LINE)
    assert "order_id=ORD-58213" in lines[0]


def test_cat_accepts_relative_and_file_url_references(
    filled: Path, cli: Callable[..., Any]
) -> None:
    relative = cli("cat", "sessions/run-1/tool_result-call_1.txt", "--lines", "3", "-w", filled)
    assert relative.code == 2  # -w is no option: usage error, not a crash
    relative = cli(
        "cat", "sessions/run-1/tool_result-call_1.txt", "--lines", "3", "--workdir", filled
    )
    url = cli(
        "cat",
        f"file://{filled}/sessions/run-1/tool_result-call_1.txt",
        "--lines",
        "3",
        "--workdir",
        filled,
    )
    assert relative.code == url.code == 0
    assert relative.out == url.out and "00003 INFO" in url.out


def test_cat_shows_a_context_line_as_a_readable_message(
    filled: Path, cli: Callable[..., Any]
) -> None:
    result = cli(
        "cat", filled / "sessions/run-1/context.jsonl", "--lines", "2:3", "--workdir", filled
    )
    assert result.code == 0
    out = result.out
    assert "[assistant]" in out and "-> tool call fetch_logs (id call_9)" in out
    assert "<- tool result fetch_logs (id call_9):" in out
    # Decoded: real quotes, a real check mark, two lines, not JSON escapes.
    assert 'the "quoted" needle \u2713 on line two' in out
    assert "\\n" not in out and '\\"' not in out


def test_cat_refuses_a_path_outside_the_workspace(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    for reference in (
        secret,
        f"{filled}/../secret.txt",
        "/etc/passwd",
        "sessions/../../secret.txt",
    ):
        result = cli("cat", reference, "--workdir", filled)
        assert result.code == 2, reference
        assert "top secret" not in result.out and result.err.count("\n") == 1


def test_cat_refuses_a_symlink_planted_inside(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (filled / "sessions/run-1/tool_result-evil.txt").symlink_to(secret)
    result = cli("cat", filled / "sessions/run-1/tool_result-evil.txt", "--workdir", filled)
    assert result.code == 2 and "top secret" not in result.out


def test_cat_does_not_print_binary_data(filled: Path, cli: Callable[..., Any]) -> None:
    data = next((filled / "data").iterdir())
    result = cli("cat", data, "--workdir", filled)
    assert result.code == 0 and f"binary file, {len(PNG):,} bytes" in result.out


def test_cat_rejects_a_bad_line_range(filled: Path, cli: Callable[..., Any]) -> None:
    for bad in ("x:y", "0:3", "9:2"):
        result = cli("cat", "sessions/run-1/context.jsonl", "--lines", bad, "--workdir", filled)
        assert result.code == 2 and "--lines" in result.err


def test_stats_counts_what_was_saved(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("stats", "--workdir", filled, "--json")
    assert result.code == 0
    report = json.loads(result.out)
    one = next(s for s in report["sessions"] if s["session"] == "run-1")
    assert one["tokens_kept_out"] == (9000 - 1000) + (30000 - 500)
    assert one["compressions"] == 1 and one["summaries"] == {"extractive": 1}
    offloaded = (
        sum(p.stat().st_size for p in (filled / "sessions/run-1").glob("tool_result-*.txt"))
        + (filled / "sessions/run-1/context.jsonl").stat().st_size
    )
    assert one["bytes_offloaded"] == offloaded
    total = report["total"]
    assert total["sessions"] == 2 and total["data_files"] == 1
    # One image referenced from five places (two tool results per session... and a message)
    # is stored once: everything but one copy is saved.
    assert total["dedup_saved_bytes"] == (total["data_references"] - 1) * len(PNG)
    assert total["data_references"] >= 3


def test_stats_prints_a_total_line(filled: Path, cli: Callable[..., Any]) -> None:
    out = cli("stats", "--workdir", filled).out
    assert "all 2 sessions" in out and "1 extractive" in out


def _corrupt(filled: Path) -> None:
    for name in ("events.jsonl", "context.jsonl"):
        path = filled / "sessions/run-1" / name
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(lines[0] + b"{this is not json\n" + b"".join(lines[1:]))


def test_a_corrupt_line_is_skipped_and_said_not_a_crash(
    filled: Path, cli: Callable[..., Any]
) -> None:
    _corrupt(filled)
    for command in (["ls"], ["stats"], ["grep", "ORD-58213"]):
        result = cli(*command, "--workdir", filled)
        assert result.code == 0, (command, result)
        assert "Traceback" not in result.err
    for command in ("ls", "stats"):
        err = cli(command, "--workdir", filled).err
        assert err == (
            f"ctxoffload {command}: warning: {filled}/sessions/run-1/events.jsonl line 2 is "
            "not valid JSON: skipped; `ctxoffload verify` checks the workspace\n"
        )
    out = cli("cat", "sessions/run-1/context.jsonl", "--lines", "2", "--workdir", filled).out
    assert out.startswith("     2\t(not JSON: a corrupt line) {this is not json")
    assert cli("verify", "--workdir", filled).code == 1


def test_ls_does_not_follow_a_planted_events_link(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"kind": "compression"}\n' * 50)
    events = filled / "sessions/run-2/events.jsonl"
    events.unlink()
    events.symlink_to(outside)
    rows = {r["session"]: r for r in json.loads(cli("ls", "--json", "--workdir", filled).out)}
    assert rows["run-2"]["compressions"] == 0
    stats = json.loads(cli("stats", "run-2", "--json", "--workdir", filled).out)
    assert stats["total"]["compressions"] == 0


def test_the_demo_says_its_window_and_trigger(demo: Any, cli: Callable[..., Any]) -> None:
    result = demo.result  # `ctxoffload demo`, run once for all its tests (tests/cli/conftest.py)
    assert result.code == 0
    assert result.out.splitlines()[1] == (
        "window 4,000 tokens; compression triggers above 0.7 x window = 2,800 tokens and keeps "
        "600 (0.15); tool results over 600 tokens go to files"
    )
    assert result.err == ""  # progress is drawn only on a terminal
    workdir = demo.workdir
    assert f"ctxoffload --workdir {workdir} grep ERROR nightly-job" in result.out
    # The command the demo suggests finds the fact that left the context.
    found = cli("--workdir", workdir, "grep", "ERROR", "nightly-job")
    assert found.code == 0
    assert f"{workdir}/sessions/nightly-job/tool_result-call_2.txt:" in found.out
    assert "order_id=ORD-58213" in found.out


def test_stats_counts_a_pipelines_offloads_and_window_moves(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import asyncio

    from ctxoffload import (
        Compressor,
        ContextConfig,
        ContextPipeline,
        LocalWorkspace,
        Msg,
        ToolCallBlock,
        ToolResultBlock,
    )
    from ctxoffload.compression import SlidingWindow, ToolOutputOffload

    ws = LocalWorkspace(tmp_path / "ws")
    pipeline = ContextPipeline(
        post_tool=[ToolOutputOffload(max_tokens=100, preview_tokens=20)],
        pre_llm=[SlidingWindow(max_messages=2)],
        config=ContextConfig(context_window=50_000),
    )
    run = pipeline.bind(Compressor(pipeline.config, offloader=ws, session_id="p1"))

    async def play() -> None:
        msgs = [Msg(role="user", content="go")]
        for i in range(4):
            msgs.append(Msg(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="t")]))
            block = ToolResultBlock(id=f"c{i}", name="t", output="row\n" * 500)
            msgs.append(Msg(role="tool", content=[await run.post_tool(block)]))
            msgs = (await run.pre_llm(msgs)).messages

    asyncio.run(play())
    report = json.loads(cli("stats", "--workdir", tmp_path / "ws", "--json").out)
    (one,) = report["sessions"]
    assert one["truncations"] == 4 and one["compressions"] >= 1
    assert one["tokens_kept_out"] > 0


async def _agent_run(workspace: Any, session: str, turns: int) -> None:
    """An Agent's session of `turns` turns, each a tool call, its result and an answer:
    4 messages a turn (the question, the call, the result, the answer), 2 steps."""
    from ctxoffload import Agent, Msg, ScriptedModel, ToolCallBlock

    def look(topic: str) -> str:
        """Look a topic up."""
        return f"all is well with {topic}"

    replies: list[Any] = []
    for turn in range(turns):
        call = ToolCallBlock(id=f"call_{turn}", name="look", input={"topic": "jobs"})
        replies += [Msg(role="assistant", content=[call]), f"answer {turn}"]
    async with Agent(
        model=ScriptedModel(replies), tools=[look], offloader=workspace, session_id=session
    ) as agent:
        for turn in range(turns):
            await agent.reply(f"question {turn}")


def test_ls_counts_the_messages_of_a_session_not_its_context_lines(
    new_workspace: Callable[[str], tuple[str, Any]], cli: Callable[..., Any]
) -> None:
    """Nothing left the context (context.jsonl is empty), yet the session had 12 messages
    over 6 steps: `ls` says 12, in its table and its JSON, on a folder and a database."""
    import asyncio

    for kind in ("folder", "sqlite"):
        workdir, workspace = new_workspace(kind)
        asyncio.run(_agent_run(workspace, "run-1", 3))
        [row] = json.loads(cli("ls", "--json", "--workdir", workdir).out)
        assert (row["steps"], row["messages"], row["message_lines"]) == (6, 12, 0), (kind, row)
        table = cli("ls", "--workdir", workdir).out.splitlines()
        assert table[0].split()[:6] == ["session", "last", "activity", "(UTC)", "steps", "messages"]
        assert table[1].split()[3:5] == ["6", "12"], table


def test_stats_lists_the_sessions_in_the_order_ls_does(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """The most recently active first, whatever their names (by name they would be a, b, c)."""
    import asyncio
    import os
    from datetime import datetime, timedelta

    from ctxoffload import LocalWorkspace, Msg

    workspace = LocalWorkspace(tmp_path, fsync=False)
    for name in ("a-oldest", "b-newest", "c-middle"):
        asyncio.run(workspace.offload_context(name, msgs=[Msg(role="user", content=name)]))
    # Aged by their record's clock, the latest event's time, which orders them; the files'
    # times (what a session with no event time is ordered by) are aged alike.
    for age, name in ((300, "a-oldest"), (100, "b-newest"), (200, "c-middle")):
        events = tmp_path / "sessions" / name / "events.jsonl"
        lines = [json.loads(line) for line in events.read_text().splitlines()]
        for event in lines:
            when = datetime.fromisoformat(event["time"]) - timedelta(seconds=age)
            event["time"] = when.isoformat(timespec="milliseconds")
        events.write_text("".join(json.dumps(event) + "\n" for event in lines))
        for path in (tmp_path / "sessions" / name).iterdir():
            os.utime(path, (path.stat().st_mtime - age,) * 2)
    listed = [row["session"] for row in json.loads(cli("ls", "--json", "--workdir", tmp_path).out)]
    counted = json.loads(cli("stats", "--json", "--workdir", tmp_path).out)["sessions"]
    assert listed == ["b-newest", "c-middle", "a-oldest"]
    assert [row["session"] for row in counted] == listed
    table = cli("stats", "--workdir", tmp_path).out.splitlines()
    assert [line.split()[0] for line in table[1:4]] == listed
