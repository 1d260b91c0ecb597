"""`ctxoffload replay`: every transcript format, side-by-side configs, and the loss check."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Summary, get_token_counter
from ctxoffload.cli._cmd_replay import replay_run
from ctxoffload.cli._recoverable import check_recoverable
from ctxoffload.cli._transcripts import load_transcript
from helpers import CORPUS, corpus_cases, corpus_files, corpus_missing, install_hint


def _output(i: int) -> str:
    return "\n".join(f"step {i} line {n}: value={n * i} status=ok" for n in range(400))


def openai_transcript(steps: int = 12) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Check every shard."},
    ]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": f"Checking shard {i}.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "check_shard", "arguments": json.dumps({"shard": i})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": _output(i)})
    messages.append({"role": "assistant", "content": "All shards are fine."})
    return messages


def anthropic_transcript(steps: int = 12) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Check every shard."}]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking shard {i}."},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "check", "input": {"s": i}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": _output(i)}
                ],
            }
        )
    messages.append({"role": "assistant", "content": "All fine."})
    return {"system": "You are careful.", "messages": messages}


@pytest.fixture
def small_config(tmp_path: Path) -> Path:
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"context_window": 4000, "tool_result_limit": 300}))
    return path


def _replay(cli: Callable[..., Any], *args: Any) -> tuple[int, dict[str, Any]]:
    result = cli("replay", *args, "--json")
    assert "Traceback" not in result.err
    return result.code, json.loads(result.out) if result.out else {}


@pytest.mark.parametrize("shape", ["openai-list", "openai-jsonl", "openai-object", "anthropic"])
def test_replay_of_each_chat_format(
    tmp_path: Path, cli: Callable[..., Any], small_config: Path, shape: str
) -> None:
    path = tmp_path / "t.json"
    if shape == "openai-list":
        path.write_text(json.dumps(openai_transcript()))
    elif shape == "openai-jsonl":
        path.write_text("\n".join(json.dumps(m) for m in openai_transcript()) + "\n")
    elif shape == "openai-object":
        path.write_text(json.dumps({"messages": openai_transcript()}))
    else:
        path.write_text(json.dumps(anthropic_transcript()))
    code, report = _replay(cli, path, "--config", small_config, "--workdir", tmp_path / "ws")
    assert code == 0
    assert report["format"] == ("anthropic" if shape == "anthropic" else "openai")
    [result] = report["results"]
    assert result["model_calls"] == 13
    assert result["files_offloaded"] == 12  # every 400-line output was cut into a file
    assert result["compressions"] >= 1
    assert result["recoverable"] and result["lost"] == []
    assert result["peak_tokens"] < 4000 < result["peak_tokens_without"]
    steps = result["steps"]
    assert [s["step"] for s in steps] == list(range(1, 14))
    assert all(s["tokens"] <= s["without"] for s in steps)
    # The session is in the workspace, with its files.
    session = tmp_path / "ws" / "sessions" / result["session"]
    assert len(list(session.glob("tool_result-*.txt"))) == 12
    assert (session / "context.jsonl").exists()


def test_several_configs_side_by_side(
    tmp_path: Path, cli: Callable[..., Any], small_config: Path
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    roomy = tmp_path / "roomy.json"
    roomy.write_text(json.dumps({"context_window": 200_000}))
    result = cli(
        "replay",
        path,
        "--config",
        small_config,
        "--config",
        roomy,
        "--workdir",
        tmp_path / "ws",
        "--session",
        "cmp",
    )
    assert result.code == 0
    out = result.out
    assert "small (4,000)" in out and "roomy (200,000)" in out
    lines = {
        line.split()[0]: line for line in out.splitlines() if line.startswith(("small ", "roomy "))
    }
    assert "cmp-c1" in lines["small"] and "cmp-c2" in lines["roomy"]
    assert sorted(p.name for p in (tmp_path / "ws/sessions").iterdir()) == ["cmp-c1", "cmp-c2"]


async def test_the_loss_check_finds_what_cannot_be_read_back(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    _, [run] = load_transcript(path)
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    config = ContextConfig(context_window=4000, tool_result_limit=300)
    result = await replay_run(
        run.messages, config, ws, "s", run_name="t", config_name="c", counter=get_token_counter()
    )
    assert result.lost == [] and result.compressions >= 1

    async def check() -> list[str]:
        return await check_recoverable(run.messages, result.context, ws, "s")

    # A tool output whose file is gone.
    (ws.session_dir("s") / "tool_result-call_11.txt").unlink()
    assert await check() == [
        "tool result call_11 of message " + run.messages[-2].id + " is in no file"
    ]
    # A compressed message whose line is gone.
    log = ws.context_path("s")
    lines = log.read_bytes().splitlines(keepends=True)
    gone = json.loads(lines[0])
    log.write_bytes(b"".join(lines[1:]))
    lost = await check()
    assert any(gone["id"] in what and "neither in the context" in what for what in lost)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("this is not json {", "neither JSON nor JSONL"),
        ('{"some": "object"}', "in no format replay knows"),
        ("[1, 2, 3]", "in no format replay knows"),
        ('{"messages": [{"role": "robot", "content": 1}]}', "is not valid openai"),
        ("", "neither JSON nor JSONL"),
    ],
)
def test_a_bad_transcript_is_one_line_exit_2_and_creates_nothing(
    tmp_path: Path, cli: Callable[..., Any], content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = cli("replay", path, "--workdir", tmp_path / "ws")
    assert result.code == 2, result
    assert message in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "ws").exists()


def _codex_rollout(call: dict[str, Any]) -> str:
    """A Codex rollout whose third line is the function_call `call` (a blank line before it)."""
    rows = [
        {"type": "session_meta", "payload": {"id": "r1"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": []}},
        {"type": "response_item", "payload": {"type": "function_call", "arguments": "{}", **call}},
    ]
    return "\n".join([json.dumps(rows[0]), json.dumps(rows[1]), "", json.dumps(rows[2])]) + "\n"


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (
            {"call_id": {"x": 1}, "name": ["shell"]},
            "line 4: the function_call item's call_id holds a dict ({'x': 1}), where a string "
            "belongs",
        ),
        (
            {"call_id": "c1", "name": ["shell"]},
            "line 4: the function_call item's name holds a list (['shell']), where a string "
            "belongs",
        ),
        ({"name": "shell"}, "line 4: the function_call item's call_id holds nothing"),
    ],
)
def test_a_codex_field_of_the_wrong_type_is_one_line_naming_its_line_and_field(
    tmp_path: Path, cli: Callable[..., Any], call: dict[str, Any], said: str
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(_codex_rollout(call))
    for fmt in (["--format", "codex"], []):
        result = cli("replay", path, *fmt, "--workdir", tmp_path / "ws")
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert f"is not valid codex: {said}" in result.err
        assert "pydantic" not in result.err and "ValidationError" not in result.err
    assert not (tmp_path / "ws").exists()


def test_a_missing_transcript_or_config(tmp_path: Path, cli: Callable[..., Any]) -> None:
    result = cli("replay", tmp_path / "nope.json", "--workdir", tmp_path / "ws")
    assert result.code == 2 and "is not a file" in result.err
    good = tmp_path / "t.json"
    good.write_text(json.dumps(openai_transcript(2)))
    for config in ('{"trigger_ratio": 7}', "not json"):
        (tmp_path / "c.json").write_text(config)
        result = cli("replay", good, "--config", tmp_path / "c.json", "--workdir", tmp_path / "ws")
        assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert not (tmp_path / "ws").exists()


def test_replay_refuses_a_folder_that_is_not_a_workspace(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    good = tmp_path / "t.json"
    good.write_text(json.dumps(openai_transcript(2)))
    result = cli("replay", good, "--workdir", tmp_path)
    assert result.code == 2 and "not a ctxoffload workspace" in result.err
    result = cli("replay", good, "--workdir", good)
    assert result.code == 2 and "is not a folder" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_replay_writes_into_an_empty_folder_made_for_it_as_demo_does(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """`mkdir runs && ctxoffload replay t.json --workdir runs` was refused as "not a ctxoffload
    workspace", where `demo --workdir runs` takes the same folder; a link to an empty folder
    is still no folder of its own, and is refused."""
    good = tmp_path / "t.json"
    good.write_text(json.dumps(openai_transcript(2)))
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    result = cli("replay", good, "--workdir", tmp_path / "link")
    assert result.code == 2 and "not a ctxoffload workspace" in result.err
    assert list((tmp_path / "empty").iterdir()) == []
    result = cli("replay", good, "--session", "t", "--workdir", tmp_path / "empty")
    assert result.code == 0, result.err
    assert (tmp_path / "empty" / "sessions" / "t" / "events.jsonl").is_file()


def test_replay_refuses_a_hostile_or_taken_session(tmp_path: Path, cli: Callable[..., Any]) -> None:
    good = tmp_path / "t.json"
    good.write_text(json.dumps(openai_transcript(2)))
    assert cli("replay", good, "--session", "../x", "--workdir", tmp_path / "ws").code == 2
    assert not (tmp_path / "ws").exists()
    assert cli("replay", good, "--session", "once", "--workdir", tmp_path / "ws").code == 0
    again = cli("replay", good, "--session", "once", "--workdir", tmp_path / "ws")
    assert again.code == 2 and "already exists" in again.err


CORPUS_FILES = corpus_files()
EXPECTED_FORMAT = {
    "minisweagent": "mini-swe-agent",
    "openhands": "openhands",
    "claudecode": "claude-code",
    "codex": "codex",
    "sweagent": "swe-agent",
}


@pytest.mark.parametrize("path", corpus_cases(CORPUS_FILES))
def test_replay_of_every_corpus_file(tmp_path: Path, cli: Callable[..., Any], path: Path) -> None:
    code, report = _replay(cli, path, "--window", "16000", "--workdir", tmp_path / "ws")
    assert code == 0, report
    assert report["format"] == EXPECTED_FORMAT[path.name.split("-")[0]]
    for result in report["results"]:
        assert result["recoverable"], result["lost"]
        assert result["model_calls"] >= 5
        assert result["peak_tokens"] <= 16000
        if result["peak_tokens_without"] > 16000:
            # Truncating big results may be enough on its own; something must have left.
            assert result["compressions"] + result["files_offloaded"] >= 1


# A Claude Code session whose Read of a screenshot returns only the image: compressed, the
# image leaves the context as a reference into data/.
SCREENSHOT_SESSION = CORPUS / "claudecode-agentcmd-full-session-two.jsonl"
needs_screenshot_session = pytest.mark.skipif(
    not SCREENSHOT_SESSION.is_file(),
    reason=corpus_missing(SCREENSHOT_SESSION.name if CORPUS.is_dir() else None),
)


@needs_screenshot_session
@pytest.mark.parametrize("window", [4000, 8000, 16000])
def test_an_image_stored_in_data_is_recoverable_and_verify_agrees(
    tmp_path: Path, cli: Callable[..., Any], window: int
) -> None:
    workdir = tmp_path / "ws"
    code, report = _replay(cli, SCREENSHOT_SESSION, "--window", str(window), "--workdir", workdir)
    [result] = report["results"]
    assert (code, result["lost"]) == (0, []), result["lost"]
    verified = cli("verify", "--json", "--workdir", workdir)
    assert verified.code == 0 and json.loads(verified.out)["ok"], verified.out


@needs_screenshot_session
async def test_a_damaged_data_file_is_lost_to_replay_and_to_verify(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    _, [run] = load_transcript(SCREENSHOT_SESSION)
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    config = ContextConfig(context_window=8000)
    result = await replay_run(
        run.messages, config, ws, "s", run_name="t", config_name="c", counter=get_token_counter()
    )
    assert result.lost == []
    [image] = (tmp_path / "ws" / "data").iterdir()
    image.write_bytes(image.read_bytes() + b"x")
    lost = await check_recoverable(run.messages, result.context, ws, "s")
    assert len(lost) == 1 and lost[0].startswith("tool result "), lost
    problems = json.loads(cli("verify", "--json", "--workdir", tmp_path / "ws").out)["problems"]
    assert [p["path"] for p in problems] == [str(image)], problems


def test_the_corpus_is_there_or_the_skip_says_why() -> None:
    if not CORPUS.is_dir():
        pytest.skip(corpus_missing())
    assert len(CORPUS_FILES) == 11


def test_a_replay_that_offloads_nothing_still_writes_its_session(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript(1)))
    code, report = _replay(
        cli, path, "--window", "100000", "--session", "calm", "--workdir", tmp_path / "ws"
    )
    assert code == 0 and report["results"][0]["compressions"] == 0
    events = (tmp_path / "ws/sessions/calm/events.jsonl").read_text().splitlines()
    first = json.loads(events[0])
    assert first["kind"] == "replay" and first["config"]["context_window"] == 100000


def test_summaries_by_a_model_on_an_openai_compatible_server(
    tmp_path: Path, cli: Callable[..., Any], small_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai", reason=f"no openai: {install_hint('openai')}")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    from openai_server import OpenAIServer

    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    reply = {name: f"{name} written by the model" for name in Summary.model_fields}
    with OpenAIServer() as server:
        for _ in range(20):
            server.add_completion(json.dumps(reply))
        code, report = _replay(
            cli,
            path,
            "--config",
            small_config,
            "--summary-model",
            "summarizer",
            "--base-url",
            server.base_url,
            "--session",
            "m",
            "--workdir",
            tmp_path / "ws",
        )
        assert server.requests and server.requests[0]["model"] == "summarizer"
    assert code == 0 and report["results"][0]["recoverable"]
    log = (tmp_path / "ws/sessions/m/events.jsonl").read_text()
    events = [json.loads(line) for line in log.splitlines()]
    sources = {e["summary_source"] for e in events if e["kind"] == "compression"}
    assert sources == {"model"}
    state = (tmp_path / "ws/sessions/m/context.jsonl").read_text()
    assert state  # the compressed messages are on disk


def test_a_summary_model_without_a_key_is_one_line(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai", reason=f"no openai: {install_hint('openai')}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript(2)))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = cli("replay", path, "--summary-model", "x", "--workdir", tmp_path / "ws")
    assert result.code == 2 and "no API key" in result.err
    assert result.err.count("\n") == 1 and not (tmp_path / "ws").exists()


def test_ls_shows_the_model_calls_of_a_replayed_session(
    tmp_path: Path, cli: Callable[..., Any], small_config: Path
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript(6)))
    code, report = _replay(
        cli, path, "--config", small_config, "--session", "r", "--workdir", tmp_path / "ws"
    )
    assert code == 0
    calls = report["results"][0]["model_calls"]
    assert calls > 0
    [row] = json.loads(cli("ls", "--json", "--workdir", tmp_path / "ws").out)
    assert row["steps"] == calls


def test_one_config_given_twice_gets_two_columns_of_its_own(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    (tmp_path / "small.json").write_text('{"context_window": 4000}')
    config = tmp_path / "small.json"
    result = cli(
        "replay", path, "--config", config, "--config", config, "--workdir", tmp_path / "ws"
    )
    assert result.code == 0, result
    assert "small-1 (4,000)" in result.out and "small-2 (4,000)" in result.out


def test_the_legend_shows_only_when_something_was_compressed(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript(3)))
    roomy = cli("replay", path, "--window", "200000", "--workdir", tmp_path / "a")
    assert roomy.code == 0 and "compressed before" not in roomy.out
    path.write_text(json.dumps(openai_transcript()))
    tight = cli("replay", path, "--window", "2000", "--workdir", tmp_path / "b")
    assert tight.code == 0 and "(* = compressed before this model call)" in tight.out


def test_a_peak_over_the_window_is_said(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript(3)))
    result = cli("replay", path, "--window", "400", "--workdir", tmp_path / "ws")
    assert result.code == 0, result
    assert "over the window (default): the context reached" in result.out
    assert "in a 400-token window" in result.out
    # A window no compaction fits in is refused, in one line naming the least one that does.
    small = cli("replay", path, "--window", "100", "--workdir", tmp_path / "ws2")
    assert small.code == 2 and len(small.err.strip().splitlines()) == 1, small
    assert "context_window 100 cannot hold" in small.err and "at least 379 tokens" in small.err


@pytest.mark.slow
def test_a_warning_of_every_run_is_said_once(tmp_path: Path) -> None:
    # Three configurations, one compressor each, the same misfit: one line on stderr (a real
    # process: in this one, pytest's log capture would take the line).
    import subprocess
    import sys

    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    config = tmp_path / "tight.json"
    config.write_text('{"context_window": 4000, "tool_result_limit": 500}')
    command = [sys.executable, "-m", "ctxoffload", "replay", str(path)]
    command += ["--config", str(config)] * 3 + ["--workdir", str(tmp_path / "ws")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("does not fit the reserve") == 1, done.stderr


def _columns_taken(text: str) -> int:
    """The terminal columns `text` takes: a wide (CJK) character two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def test_a_config_named_in_wide_characters_keeps_the_table_aligned_and_in_width(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    """A CJK character takes two columns of a terminal: the table pads and fits by what a
    cell takes on screen, not by its count of characters."""
    monkeypatch.setenv("COLUMNS", "80")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    wide = tmp_path / "配置配置配置配置配置配置.json"
    wide.write_text(json.dumps({"context_window": 4000}))
    plain = tmp_path / "b.json"
    plain.write_text(json.dumps({"context_window": 8000}))
    result = cli("replay", path, "--config", wide, "--config", plain, "--workdir", tmp_path / "ws")
    assert result.code == 0, result
    lines = result.out.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("config ")) :]
    table = [line for line in table if "left out to fit" not in line]
    assert max(_columns_taken(line) for line in table) <= 80, "\n".join(table)
    ends = {
        _columns_taken(line[: line.index(window) + len(window)])
        for line in table
        for window in ("4,000", "8,000")
        if window in line
    }
    assert len(ends) == 1, "\n".join(table)  # the window column lines up


@pytest.mark.slow
def test_replays_of_one_session_started_together_write_it_once(tmp_path: Path) -> None:
    """Three `replay --session same` started at once all passed the check that the session
    did not exist yet, and all wrote it: one session holding three replays. Each now takes
    the session new, under its lease: one writes it, the others are refused."""
    import subprocess
    import sys

    path = tmp_path / "t.json"
    path.write_text(json.dumps(openai_transcript()))
    command = [sys.executable, "-m", "ctxoffload", "replay", str(path), "--session", "same"]
    command += ["--workdir", str(tmp_path / "ws")]
    racing = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    done = [(p.wait(timeout=120), p.communicate()[1]) for p in racing]
    assert sorted(code for code, _ in done) == [0, 2, 2], done
    assert all("already exists" in err for code, err in done if code == 2)
    events = (tmp_path / "ws" / "sessions" / "same" / "events.jsonl").read_text()
    assert (
        sum('"kind": "replay"' in line or '"kind":"replay"' in line for line in events.splitlines())
        == 1
    )
