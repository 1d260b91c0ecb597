"""Nothing a workspace holds reaches the terminal as a control sequence: every command that
prints its content (`cat`, `show`, `show --step`, `grep`, `watch`, `ls`, `stats`, `verify`,
`gc`, `replay`, and their errors) shows control characters, escape sequences, a bare CR and
bidirectional controls as visible escapes, while `--json` stays exact and `cat --raw` to a
pipe gives the bytes as stored.

The commands run as real processes, and the test reads the bytes they write.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from helpers import on_a_terminal

# What a model, a tool or a planted file name may hold: a screen clear (CSI 2J), a clipboard
# write (OSC 52), a hidden link (OSC 8), a window title (OSC 0), a bare CR that rewrites the
# line, a C1 CSI (0x9b), DEL, and bidi overrides and isolates that reorder a line.
HOSTILE = (
    "A\x1b[2J"
    "\x1b]52;c;SGVsbG8=\x07"
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"
    "\x1b]0;owned\x07"
    "\rOVERWRITTEN"
    "\x9b31m\x7f"
    "\u202etxt.exe\u202c\u2066\u200f\u061cZ"
)
# The raw bytes none of which may reach the terminal: ESC, BEL, CR, C1 CSI, DEL, and the bidi
# controls, in UTF-8. (Our own newlines are plain \n: the commands write to a pipe.)
FORBIDDEN = [
    b"\x1b",
    b"\x07",
    b"\r",
    b"\x7f",
    "\x9b".encode(),
    "\u202e".encode(),
    "\u202c".encode(),
    "\u2066".encode(),
    "\u200f".encode(),
    "\u061c".encode(),
]
# A generous bound for a loaded machine, not a speed check.
PATIENCE = 120.0
# A name the disk allows for a session folder or a file (no `/`, no NUL).
NAME = "s\x1b]0;title\x07\u202eX"


def _clean(data: bytes) -> list[bytes]:
    return [b for b in FORBIDDEN if b in data]


async def _fill(workdir: Path) -> None:
    ws = LocalWorkspace(workdir, fsync=False)
    await ws.initialize()
    session = "run-1"
    await ws.offload_tool_result(
        session, ToolResultBlock(id="call_1", name="fetch", output=f"first\nneedle {HOSTILE}\n")
    )
    await ws.offload_context(
        session,
        msgs=[
            Msg(role="user", content=f"needle {HOSTILE}"),
            Msg(
                role="assistant",
                content=[
                    TextBlock(text=f"needle {HOSTILE}"),
                    ToolCallBlock(id="c2", name=f"tool{HOSTILE}", input={"arg": HOSTILE}),
                ],
            ),
        ],
    )
    message = {"id": "m1", "role": "user", "content": f"needle {HOSTILE}"}
    events = [
        {"kind": "session_start", "agent": HOSTILE, "model": HOSTILE, "tools": [HOSTILE]},
        {"kind": "message", "message": message},
        {
            "kind": "model_call",
            "step": 1,
            "messages": ["m1"],
            "outcome": HOSTILE,
            "tool_calls": [{"name": HOSTILE}],
        },
        {
            "kind": "tool_call",
            "name": HOSTILE,
            "tool_id": HOSTILE,
            "outcome": "error",
            "error": {"type": HOSTILE, "message": HOSTILE, "traceback": HOSTILE},
        },
        {"kind": "truncation", "tool_name": HOSTILE, "reference": HOSTILE},
        {"kind": "summary", "task_overview": HOSTILE, "current_state": HOSTILE},
        {"kind": "compression", "reference": HOSTILE, "summary_source": HOSTILE},
        {"kind": HOSTILE},
    ]
    for event in events:
        kind = event.pop("kind")
        await ws.record_event(session, kind, **event)
    # A session folder and a tool_result file with hostile names, planted on disk.
    hostile = workdir / "sessions" / NAME
    hostile.mkdir()
    (hostile / f"tool_result-{NAME}.txt").write_text(f"needle {HOSTILE}\n")
    (hostile / "events.jsonl").write_text(json.dumps({"kind": HOSTILE, "time": HOSTILE}) + "\n")
    # A foreign file in data/ that verify names, with a hostile name.
    (workdir / "data" / NAME).write_text("x")


@pytest.fixture(scope="module")
def hostile_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("hostile") / "ws"
    asyncio.run(_fill(workdir))
    return workdir


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "", "COLUMNS": "200"}
    env.pop("CTXOFFLOAD_WORKDIR", None)
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


COMMANDS = {
    "cat tool result": ["cat", "sessions/run-1/tool_result-call_1.txt"],
    "cat context": ["cat", "sessions/run-1/context.jsonl"],
    "cat --raw context (rendered escaped on a pipe only for tool results)": [
        "cat",
        f"sessions/{NAME}/tool_result-{NAME}.txt",
    ],
    "cat error": ["cat", f"sessions/{NAME}/missing{HOSTILE}"],
    "show": ["show", "run-1"],
    "show --full": ["show", "run-1", "--full"],
    "show --step": ["show", "run-1", "--step", "1"],
    "show hostile id": ["show", NAME],
    "grep": ["grep", "needle"],
    "grep -C": ["grep", "-C", "2", "needle"],
    "grep --events": ["grep", "--events", "owned"],
    "grep error": ["grep", "needle", NAME],
    "stats": ["stats"],
    "verify": ["verify"],
}
# Commands that show sessions by name only: the planted folder is no session (its name is no
# session id), so they show nothing of it.
BY_NAME = {
    "ls": ["ls"],
    "gc": ["gc", "--max-bytes", "0", "--dry-run"],
}


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_no_command_writes_a_control_sequence_from_the_workspace(
    hostile_workspace: Path, argv: list[str]
) -> None:
    done = _run(*argv, "--workdir", hostile_workspace)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert _clean(done.stdout) == [], done.stdout
    assert _clean(done.stderr) == [], done.stderr
    # Shown, not dropped: the escapes are there to read.
    assert b"\\x1b" in done.stdout + done.stderr, (done.stdout, done.stderr)


@pytest.mark.parametrize("argv", BY_NAME.values(), ids=BY_NAME.keys())
def test_a_folder_named_as_no_session_is_not_listed(
    hostile_workspace: Path, argv: list[str]
) -> None:
    done = _run(*argv, "--workdir", hostile_workspace)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    assert _clean(done.stdout + done.stderr) == [], (done.stdout, done.stderr)
    assert b"run-1" in done.stdout and b"title" not in done.stdout + done.stderr


def test_watch_writes_no_control_sequence(hostile_workspace: Path) -> None:
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "watch",
            "--from-start",
            "--workdir",
            str(hostile_workspace),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    chunks: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        assert watch.stdout is not None
        while chunk := watch.stdout.read1(65536):  # type: ignore[attr-defined]
            chunks.put(chunk)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    out = b""
    try:
        # What --from-start prints: run-1's events, file and messages (the planted folder
        # is no session, as its name is no session id).
        while out.count(b"new file") < 1 or out.count(b"needle") < 2:
            try:
                out += chunks.get(timeout=PATIENCE)
            except queue.Empty:
                raise AssertionError(f"watch printed only {out!r}") from None
    finally:
        watch.kill()
        watch.wait()
        pumping.join(PATIENCE)  # EOF now that watch is gone
        assert watch.stdout is not None and watch.stderr is not None
        err = watch.stderr.read()
        watch.stdout.close()
        watch.stderr.close()
    assert _clean(out) == [], out
    assert _clean(err) == [], err


def _openhands_line(instance_id: str) -> str:
    history = [
        {"action": "message", "source": "user", "args": {"content": f"do {HOSTILE}"}},
        {"action": "message", "source": "agent", "args": {"content": f"done {HOSTILE}"}},
        {"action": "message", "source": "user", "args": {"content": "again"}},
        {"action": "message", "source": "agent", "args": {"content": "done"}},
    ]
    return json.dumps({"instance_id": instance_id, "history": history})


@pytest.mark.slow
def test_replay_writes_no_control_sequence_from_a_run_name(tmp_path: Path) -> None:
    transcript = tmp_path / "output.jsonl"
    transcript.write_text(
        _openhands_line(f"a{HOSTILE}") + "\n" + _openhands_line(f"b{HOSTILE}") + "\n"
    )
    config = tmp_path / f"c{NAME}.json"
    config.write_text("{}")
    done = _run("replay", transcript, "--config", config, "--workdir", tmp_path / "ws")
    assert done.returncode == 0, done.stderr.decode()
    assert _clean(done.stdout) == [], done.stdout
    assert _clean(done.stderr) == [], done.stderr
    assert b"\\x1b" in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["grep", "--json", "needle"],
        ["show", "run-1", "--json"],
        ["show", "run-1", "--step", "1", "--json"],
        ["stats", "--json"],
        ["verify", "--json"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_json_output_stays_exact(hostile_workspace: Path, argv: list[str]) -> None:
    done = _run(*argv, "--workdir", hostile_workspace)
    assert done.returncode in (0, 1), done.stderr.decode()
    assert _clean(done.stdout) == [], done.stdout
    strings = list(_strings(json.loads(done.stdout)))
    # The strings, exactly as stored.
    assert any(HOSTILE in text or NAME in text for text in strings), strings


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_cat_raw_to_a_pipe_gives_the_bytes_as_stored(hostile_workspace: Path) -> None:
    reference = "sessions/run-1/tool_result-call_1.txt"
    done = _run("cat", "--raw", reference, "--workdir", hostile_workspace)
    assert done.returncode == 0, done.stderr.decode()
    stored = (hostile_workspace / reference).read_bytes().split(b"\n")[:-1]  # a bare CR is no end
    assert done.stdout == b"".join(
        f"{n:>6}\t".encode() + line + b"\n" for n, line in enumerate(stored, start=1)
    )


def test_grep_matches_the_real_text_and_shows_it_inert(hostile_workspace: Path) -> None:
    # The pattern holds the real ESC: it is matched on the stored text, not on its escape.
    done = _run("grep", "-F", "\x1b[2J", "run-1", "--workdir", hostile_workspace)
    assert done.returncode == 0, done.stderr.decode()
    assert _clean(done.stdout) == []
    assert b"A\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07" in done.stdout


@pytest.mark.parametrize("argv", [["ls"], ["stats"], ["verify"], ["grep", "needle"]], ids=str)
def test_colours_on_a_terminal_leave_the_content_inert(
    hostile_workspace: Path, argv: list[str]
) -> None:
    # On a terminal the commands write their own colours (rich tables, grep's and verify's
    # colours): those escapes are theirs, and the workspace's are still shown escaped.
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    status, out = on_a_terminal(
        [*argv, "--workdir", str(hostile_workspace)], env, stderr_too=True, timeout=PATIENCE
    )
    assert status in (0, 1)
    assert b"\x1b[" in out  # colours: the terminal path was taken
    planted = [b"\x1b[2J", b"\x1b]", b"\rOVERWRITTEN", "\x9b".encode(), "\u202e".encode()]
    assert [p for p in planted if p in out] == [], out
