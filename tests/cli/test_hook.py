"""`ctxoffload hook PostToolUse` and `SessionStart`, and what every hook does with bad input:
the real command in a child process, fed the JSON Claude Code documents
(tests/claude_code_hooks.py names the sources), as Claude Code runs it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_code_hooks import (
    NON_BLOCKING,
    PLUGIN,
    hook_commands,
    hook_in_project,
    output_of,
    plugin_commands,
    post_tool_use_bash,
    post_tool_use_mcp,
    post_tool_use_read,
    post_tool_use_write,
    run_hook,
    session_start,
)
from ctxoffload.tokens import get_token_counter

NOTICE = "<<<TRUNCATED>>>"


def stored_files(workdir: Path) -> list[Path]:
    return sorted(workdir.glob("sessions/*/tool_result-*.txt"))


def test_a_5_mb_bash_output_is_stored_whole_and_replaced_by_a_small_head(tmp_path: Path) -> None:
    lines = [f"{i:07d} GET /api/orders/{i} 200 {i % 97}ms" for i in range(150_000)]
    stdout = "\n".join(lines)
    assert len(stdout) > 5_000_000
    done = run_hook("PostToolUse", post_tool_use_bash(stdout), tmp_path / "ws")
    assert len(done.stdout) < 20_000  # what Claude Code reads instead of 5 MB
    out = output_of(done)["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse"
    assert "updatedMCPToolOutput" not in out  # Bash is no MCP tool
    replaced = out["updatedToolOutput"]
    # The Bash tool's own output shape, or Claude Code ignores the replacement.
    assert set(replaced) == {"stdout", "stderr", "interrupted", "isImage"}
    assert replaced["stderr"] == "" and replaced["interrupted"] is False
    head = replaced["stdout"]
    assert head.startswith(lines[0] + "\n") and NOTICE in head
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.name == "tool_result-toolu_01ABC123.txt"
    assert stored.parent.name == "00893aaf-19fa-41d2-8238-13269b9b3ca0"
    assert str(stored.resolve()) in head  # the notice names the file, as an absolute path
    assert stored.read_bytes() == stdout.encode()  # whole and byte for byte


def test_the_same_call_run_again_names_the_same_file_and_head(tmp_path: Path) -> None:
    payload = post_tool_use_bash("\n".join(f"row {i}" for i in range(40_000)))
    first = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    again = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    assert first == again
    assert len(stored_files(tmp_path / "ws")) == 1


def test_an_output_within_the_limit_is_left_alone(tmp_path: Path) -> None:
    for payload in (post_tool_use_bash("3 passed in 0.41s"), post_tool_use_write()):
        done = run_hook("PostToolUse", payload, tmp_path / "ws")
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert stored_files(tmp_path / "ws") == []


def test_the_limit_is_set_on_the_command_line(tmp_path: Path) -> None:
    payload = post_tool_use_bash("word " * 400)  # 2,000 characters
    assert run_hook("PostToolUse", payload, tmp_path / "ws").stdout == b""
    small = run_hook("PostToolUse", payload, tmp_path / "ws", "--tool-result-limit", "100")
    assert NOTICE in output_of(small)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]


def test_an_mcp_tool_output_keeps_its_content_list_and_its_image(tmp_path: Path) -> None:
    text = "\n".join(f"repo-{i}: context offloading for agents" for i in range(20_000))
    payload = post_tool_use_mcp(text)
    out = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))["hookSpecificOutput"]
    replaced = out["updatedToolOutput"]
    # Claude Code before 2.1.121 replaces an MCP tool's output only from this field.
    assert out["updatedMCPToolOutput"] == replaced
    assert [b["type"] for b in replaced] == ["text", "image"]
    assert NOTICE in replaced[0]["text"] and replaced[0]["text"].startswith("repo-0:")
    assert replaced[1] == payload["tool_response"][1]  # the image's base64 is no text
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_text(encoding="utf-8") == text


def mcp_output_of_texts(texts: list[str]) -> dict[str, Any]:
    """A PostToolUse input for an MCP tool whose content list is `texts`, one block each."""
    payload = post_tool_use_mcp("")
    payload["tool_response"] = [{"type": "text", "text": text} for text in texts]
    return payload


def tokens_of(output: list[dict[str, Any]]) -> int:
    return sum(get_token_counter(None).count_text(block["text"]) for block in output)


@pytest.mark.parametrize("rows", [138, 160], ids=["each-under-the-limit", "each-over-the-limit"])
def test_an_output_of_many_texts_is_measured_whole_and_stored_in_one_file(
    tmp_path: Path, rows: int
) -> None:
    # 60 blocks of about 2,900 (or 3,360) tokens each: each text was measured alone, so 174,000
    # tokens reached Claude whole (or 60 heads and notices, 119,000 tokens, in 60 files).
    line = "r{j} {i:04d}: the quick brown fox jumps over the lazy dog 0123456789"
    texts = ["\n".join(line.format(j=j, i=i) for i in range(rows)) for j in range(60)]
    done = run_hook("PostToolUse", mcp_output_of_texts(texts), tmp_path / "ws")
    replaced = output_of(done)["hookSpecificOutput"]["updatedToolOutput"]
    assert tokens_of(replaced) <= 3_000
    assert [b["type"] for b in replaced] == ["text"] and NOTICE in replaced[0]["text"]
    assert replaced[0]["text"].startswith(texts[0][:200])
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.name == "tool_result-toolu_01MCP.txt"
    assert str(stored.resolve()) in replaced[0]["text"]
    assert stored.read_text(encoding="utf-8") == "\n".join(texts)  # every block, in order


def test_a_dict_of_many_numeric_fields_is_stored_whole(tmp_path: Path) -> None:
    # Its texts are none: the hook answered at once, and 5,000 fields reached Claude whole.
    fields = {f"customer_{i:04d}_lifetime_value": i for i in range(5_000)}
    payload = post_tool_use_mcp("")
    payload["tool_response"] = fields
    replaced = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))["hookSpecificOutput"]
    assert NOTICE in replaced["updatedToolOutput"]
    (stored,) = stored_files(tmp_path / "ws")
    assert json.loads(stored.read_text(encoding="utf-8")) == fields


def test_a_big_stdout_and_stderr_are_stored_together_and_shown_in_one_preview(
    tmp_path: Path,
) -> None:
    stdout = "\n".join(f"ok {i}" for i in range(20_000))
    stderr = "\n".join(f"warning {i}: deprecated" for i in range(20_000))
    done = run_hook("PostToolUse", post_tool_use_bash(stdout, stderr=stderr), tmp_path / "ws")
    replaced = output_of(done)["hookSpecificOutput"]["updatedToolOutput"]
    assert set(replaced) == {"stdout", "stderr", "interrupted", "isImage"}
    assert NOTICE in replaced["stdout"]
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_text(encoding="utf-8") == stdout + "\n" + stderr
    # Claude is not told stderr was empty: it is told where it starts in the file.
    assert replaced["stderr"] == "[stored whole in the file named above, from its line 20,001]"
    lines = stored.read_text(encoding="utf-8").split("\n")
    assert "\n".join(lines[20_000:]) == stderr and "\n".join(lines[:20_000]) == stdout


def test_small_texts_within_the_limit_together_are_left_alone(tmp_path: Path) -> None:
    texts = [f"result {j}: " + "word " * 40 for j in range(10)]  # 2,000 characters in all
    done = run_hook("PostToolUse", mcp_output_of_texts(texts), tmp_path / "ws")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert stored_files(tmp_path / "ws") == []


def test_a_read_of_a_big_file_is_never_offloaded_again(tmp_path: Path) -> None:
    # Read is how the agent reads an offloaded file back: cutting it would loop.
    content = "\n".join(f"{i}\tline" for i in range(30_000))
    done = run_hook("PostToolUse", post_tool_use_read(content), tmp_path / "ws")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert stored_files(tmp_path / "ws") == []


def test_bytes_that_are_not_utf8_are_stored_as_they_came(tmp_path: Path) -> None:
    # A tool's raw output with bytes that are not UTF-8 (a Latin-1 log), inside the JSON.
    body = b"\n".join(b"caf\xe9 \xff\xfe row %d" % i for i in range(20_000))
    marker = "@@BODY@@"
    template = json.dumps(post_tool_use_bash(marker)).encode()
    payload = template.replace(marker.encode(), body.replace(b"\n", b"\\n"))
    out = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    head = out["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert NOTICE in head and head.startswith("caf\udce9 \udcff\udcfe row 0\n")
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_bytes() == body


def test_a_lone_surrogate_escape_in_the_json_is_kept(tmp_path: Path) -> None:
    stdout = "\n".join(f"half a pair \ud83d here {i}" for i in range(20_000))
    out = output_of(run_hook("PostToolUse", post_tool_use_bash(stdout), tmp_path / "ws"))
    head = out["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert head.startswith("half a pair ") and NOTICE in head
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_bytes() == stdout.encode("utf-8", "surrogatepass")


def test_an_output_claude_code_persisted_itself_is_read_whole(tmp_path: Path) -> None:
    whole = "\n".join(f"build step {i}: ok" for i in range(60_000))
    persisted = tmp_path / "claude" / "tool-results" / "b7x.txt"
    persisted.parent.mkdir(parents=True)
    persisted.write_text(whole, encoding="utf-8")
    payload = post_tool_use_bash(whole[:30_000])
    payload["tool_response"]["persistedOutputPath"] = str(persisted)
    payload["tool_response"]["persistedOutputSize"] = len(whole)
    out = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    replaced = out["hookSpecificOutput"]["updatedToolOutput"]
    assert "persistedOutputPath" not in replaced and "persistedOutputSize" not in replaced
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_text(encoding="utf-8") == whole  # not the 30,000 characters sent


def test_a_persisted_output_path_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n" * 5_000, encoding="utf-8")
    link = tmp_path / "tool-output.txt"
    link.symlink_to(secret)
    start = "\n".join(f"visible {i}" for i in range(5_000))
    payload = post_tool_use_bash(start)
    payload["tool_response"]["persistedOutputPath"] = str(link)
    out = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    assert "persistedOutputPath" in out["hookSpecificOutput"]["updatedToolOutput"]
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_text(encoding="utf-8") == start  # what was sent, not the link's target


def test_a_persisted_output_path_from_any_tool_but_bash_is_not_read(tmp_path: Path) -> None:
    # Only Claude Code's own Bash output names a file Claude Code persisted: an MCP server's
    # or a custom tool's dict is that tool's data, and a field of that name in it must not
    # have ctxoffload read a file of the user's into the model's context.
    secret = tmp_path / "private_key.txt"
    secret.write_text("-----BEGIN SECRET-----\n" + "secretline\n" * 5_000, encoding="utf-8")
    start = "\n".join(f"weather {i}: sunny" for i in range(5_000))
    payload = post_tool_use_mcp("")
    payload["tool_response"] = {"stdout": start, "persistedOutputPath": str(secret)}
    out = output_of(run_hook("PostToolUse", payload, tmp_path / "ws"))
    sent = json.dumps(out)
    assert "secretline" not in sent and "BEGIN SECRET" not in sent
    (stored,) = stored_files(tmp_path / "ws")
    assert "secretline" not in stored.read_text(encoding="utf-8")
    assert stored.read_text(encoding="utf-8").startswith("weather 0: sunny")


@pytest.mark.parametrize(
    "session",
    ["../../outside", "/etc/passwd", "a/b\\c", "x\x00y", ".hidden", "é" * 300, "-" * 50],
)
def test_a_hostile_session_id_names_a_session_inside_the_workspace(
    tmp_path: Path, session: str
) -> None:
    ws = tmp_path / "deep" / "ws"
    payload = post_tool_use_bash("\n".join(f"r{i}" for i in range(20_000)), session=session)
    out = output_of(run_hook("PostToolUse", payload, ws))
    (stored,) = stored_files(ws)
    assert stored.resolve().parent.parent == (ws / "sessions").resolve()
    assert str(stored.resolve()) in out["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    # Nothing was written anywhere else under tmp_path.
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert all(ws in p.parents for p in written), written


def test_two_hostile_ids_never_share_a_session(tmp_path: Path) -> None:
    big = "\n".join(f"r{i}" for i in range(20_000))
    for session in ("a/b", "a_b", "a?b"):
        output_of(run_hook("PostToolUse", post_tool_use_bash(big, session=session), tmp_path))
    assert len({p.parent for p in stored_files(tmp_path)}) == 3


BAD_INPUTS: dict[str, tuple[str, Any, str]] = {
    "not JSON": ("PostToolUse", b"tool output, not JSON", "not JSON"),
    "empty stdin": ("PreCompact", b"", "no hook input"),
    "a JSON list": ("SessionStart", [1, 2], "not an object"),
    "no session_id": (
        "PostToolUse",
        {k: v for k, v in post_tool_use_bash("x").items() if k != "session_id"},
        "'session_id'",
    ),
    "a number for session_id": (
        "PostToolUse",
        {**post_tool_use_bash("x"), "session_id": 7},
        "'session_id'",
    ),
    "no tool_response": (
        "PostToolUse",
        {k: v for k, v in post_tool_use_bash("x").items() if k != "tool_response"},
        "'tool_response'",
    ),
    "no tool_use_id": (
        "PostToolUse",
        {k: v for k, v in post_tool_use_bash("x").items() if k != "tool_use_id"},
        "'tool_use_id'",
    ),
    "another event's input": ("PreCompact", post_tool_use_bash("x"), "'PostToolUse' event"),
    "nested past any limit": ("PostToolUse", b"[" * 100_000 + b"]" * 100_000, "not JSON"),
}


@pytest.mark.parametrize("event,payload,said", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_a_non_blocking_error_on_stderr(
    tmp_path: Path, event: str, payload: Any, said: str
) -> None:
    done = run_hook(event, payload, tmp_path / "ws")
    assert done.returncode == NON_BLOCKING
    assert done.stdout == b""  # nothing Claude Code would act on
    err = done.stderr.decode()
    assert err.startswith(f"ctxoffload hook {event}: ") and said in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "ws" / "sessions").exists()


@pytest.mark.parametrize(
    "argv", [["hook"], ["hook", "Stop"], ["hook", "PreCompact", "--no-such-option"]]
)
def test_a_usage_error_never_exits_2(tmp_path: Path, argv: list[str]) -> None:
    # Exit 2 from a PreCompact hook blocks the compaction: a misconfigured hook must not.
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", *argv], input=b"{}", capture_output=True, timeout=60
    )
    assert done.returncode == NON_BLOCKING, done.stderr.decode()
    assert done.stderr.decode().startswith("ctxoffload hook: ")


def test_a_workspace_that_cannot_be_written_is_a_non_blocking_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x", encoding="utf-8")
    payload = post_tool_use_bash("\n".join(f"r{i}" for i in range(20_000)))
    done = run_hook("PostToolUse", payload, blocked / "ws")
    assert done.returncode == NON_BLOCKING and done.stdout == b""  # the output stays whole
    err = done.stderr.decode()
    assert "is not a folder" in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_the_workspace_defaults_to_dot_ctxoffload_in_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    payload = post_tool_use_bash("\n".join(f"r{i}" for i in range(20_000)))
    done = hook_in_project("PostToolUse", payload, project, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert len(stored_files(project / ".ctxoffload")) == 1


def test_session_start_other_than_after_a_compaction_says_nothing(tmp_path: Path) -> None:
    for source in ("startup", "resume", "clear", "fork"):
        done = run_hook("SessionStart", session_start(source), tmp_path / "ws")
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_session_start_after_a_compaction_nothing_recorded_says_nothing(tmp_path: Path) -> None:
    done = run_hook("SessionStart", session_start("compact"), tmp_path / "ws")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def without_commands(settings: dict[str, Any]) -> dict[str, Any]:
    """A settings file's hooks with each command left out: the events and their matchers."""
    return {
        event: [{**m, "hooks": [{**h, "command": ""} for h in m["hooks"]]} for m in matchers]
        for event, matchers in settings["hooks"].items()
    }


def test_settings_prints_the_hooks_of_the_plugin(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "hook", "settings"], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    printed = json.loads(done.stdout)
    # The same hooks, events and matchers as the plugin's; only how ctxoffload is found
    # differs (an absolute path here, the plugin's launcher there).
    command = shlex.split(printed["hooks"]["PostToolUse"][0]["hooks"][0]["command"])[0]
    assert os.path.isabs(command)
    plugin = json.loads((PLUGIN / "hooks" / "hooks.json").read_text(encoding="utf-8"))
    launcher = '/bin/sh "${CLAUDE_PLUGIN_ROOT}/hooks/run-ctxoffload"'
    assert {
        event: line.replace(shlex.quote(command), launcher, 1)
        for event, line in hook_commands(printed).items()
    } == plugin_commands()
    assert without_commands(printed) == without_commands(plugin)
    with_workdir = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "hook", "settings", "--workdir", "my ws"],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    workdir = shlex.quote(str(tmp_path / "my ws"))
    commands = hook_commands(json.loads(with_workdir.stdout)).values()
    assert all(c.startswith(f"{shlex.quote(command)} --workdir {workdir} hook ") for c in commands)


def test_the_plugin_manifest_names_the_plugin() -> None:
    plugin = PLUGIN
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "ctxoffload"
    assert isinstance(manifest.get("keywords", []), list)
    events = json.loads((plugin / "hooks" / "hooks.json").read_text(encoding="utf-8"))["hooks"]
    assert set(events) == {"PostToolUse", "PreCompact", "SessionStart"}
    assert [m["matcher"] for m in events["SessionStart"]] == ["compact"]


def test_an_output_short_in_characters_but_over_the_limit_in_tokens_is_stored(
    tmp_path: Path,
) -> None:
    # 2,990 characters, under the hook's 3,000-token limit, are 8,372 o200k tokens: `ꙮ` is
    # three. The hook once took a token for a character and passed it whole to Claude Code.
    stdout = ("ꙮ" * 9 + "\n") * 299
    assert len(stdout) < 3_000
    done = run_hook("PostToolUse", post_tool_use_bash(stdout), tmp_path / "ws")
    head = output_of(done)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert NOTICE in head and len(head.encode()) < len(stdout.encode())
    (stored,) = stored_files(tmp_path / "ws")
    assert stored.read_bytes() == stdout.encode()


def test_a_small_output_is_answered_before_asyncio_and_the_engine_load(tmp_path: Path) -> None:
    # Claude Code runs the hook as a new process after every tool call: for most outputs it
    # answers "nothing to do" on the process's bare start-up (bench/bench_hook_start.py).
    heavy = ["asyncio", "typing", "pydantic", "ctxoffload.compression", "ctxoffload.workspace"]
    child = (
        "import json, sys\n"
        "from ctxoffload.cli import main\n"
        "status = main(['hook', 'PostToolUse', '--workdir', sys.argv[1]])\n"
        "loaded = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)\n"
        "print(json.dumps([status, loaded]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "ws"), json.dumps(heavy)],
        input=json.dumps(post_tool_use_bash("3 passed in 0.41s")).encode(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [0, []]
    assert not (tmp_path / "ws").exists()
