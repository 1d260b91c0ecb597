"""The workspace Claude Code's hooks write by default, `.ctxoffload` in the project, is chosen
by whoever wrote the project: a cloned repository may ship it as a symbolic link (issue 55,
item 6). The hook follows no link there: a link, or a link inside it, is refused in one line on
stderr, the output passes through whole (exit 1, Claude Code's non-blocking error), and nothing
is written where the link points. A workspace the user names (`--workdir`,
`$CTXOFFLOAD_WORKDIR`) is trusted as every workspace is: it may be a link."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from claude_code_hooks import (
    NON_BLOCKING,
    SESSION,
    hook_in_project,
    output_of,
    post_tool_use_bash,
    pre_compact,
    run_hook,
    session_start,
    transcript_rows,
)
from helpers import PNG, snapshot_tree

BIG = "\n".join(f"{i:06d} AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/{i}" for i in range(20_000))


def payloads(project: Path) -> dict[str, Any]:
    """An input of each event that has the hook write (or read) the workspace."""
    transcript = project / "transcript.jsonl"
    transcript.write_text("".join(json.dumps(r) + "\n" for r in transcript_rows(3)), "utf-8")
    return {
        "PostToolUse": post_tool_use_bash(BIG),
        "PreCompact": pre_compact(str(transcript)),
        "SessionStart": session_start("compact"),
    }


def assert_refused(done: subprocess.CompletedProcess[bytes], event: str, *said: str) -> None:
    assert done.returncode == NON_BLOCKING  # the output, the compaction, the session go on
    assert done.stdout == b""  # nothing replaced: the output passes through whole
    err = done.stderr.decode()
    assert err.startswith(f"ctxoffload hook {event}: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for words in said:
        assert words in err, err


@pytest.mark.parametrize("event", ["PostToolUse", "PreCompact", "SessionStart"])
def test_a_dot_ctxoffload_linked_to_a_folder_outside_is_refused(tmp_path: Path, event: str) -> None:
    project = tmp_path / "cloned-repo"
    project.mkdir()
    outside = tmp_path / "attacker-readable"
    outside.mkdir()
    (project / ".ctxoffload").symlink_to(outside)
    done = hook_in_project(event, payloads(project)[event], project)
    assert_refused(
        done,
        event,
        f"{project / '.ctxoffload'}",
        "symbolic link",
        "--workdir",
        "CTXOFFLOAD_WORKDIR",
    )
    assert snapshot_tree(outside) == {}


def test_a_relative_link_up_and_out_is_refused(tmp_path: Path) -> None:
    # What a repository can ship: a relative link, which git checks out as it is.
    project = tmp_path / "cloned-repo"
    project.mkdir()
    (tmp_path / "next-door").mkdir()
    (project / ".ctxoffload").symlink_to(Path("..") / "next-door")
    done = hook_in_project("PostToolUse", post_tool_use_bash(BIG), project)
    assert_refused(done, "PostToolUse", "symbolic link")
    assert snapshot_tree(tmp_path / "next-door") == {}


def test_a_dot_ctxoffload_linked_to_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    project = tmp_path / "cloned-repo"
    project.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (project / ".ctxoffload").symlink_to(fifo)
    # A reader that waits for no writer: whatever the hook wrote would be read back here.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = hook_in_project("PostToolUse", post_tool_use_bash(BIG), project)
        assert_refused(done, "PostToolUse", "symbolic link")
        assert os.read(reader, 1 << 16) == b""
    finally:
        os.close(reader)
    assert (project / ".ctxoffload").is_symlink()


def test_a_dangling_link_makes_no_folder_where_it_points(tmp_path: Path) -> None:
    project = tmp_path / "cloned-repo"
    project.mkdir()
    target = tmp_path / "not-yet" / "there"
    (project / ".ctxoffload").symlink_to(target)
    done = hook_in_project("PostToolUse", post_tool_use_bash(BIG), project)
    assert_refused(done, "PostToolUse", "symbolic link")
    assert not (tmp_path / "not-yet").exists()


def test_a_fifo_as_dot_ctxoffload_is_refused_without_waiting(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / ".ctxoffload")
    done = hook_in_project("PostToolUse", post_tool_use_bash(BIG), project)
    assert_refused(done, "PostToolUse", "not a folder")


@pytest.mark.slow
@pytest.mark.parametrize("inside", ["sessions", "data"])
def test_a_link_inside_dot_ctxoffload_is_refused(tmp_path: Path, inside: str) -> None:
    project = tmp_path / "cloned-repo"
    (project / ".ctxoffload").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / ".ctxoffload" / inside).symlink_to(outside)
    event = "PostToolUse" if inside == "sessions" else "PreCompact"
    payload = payloads(project)[event]
    if inside == "data":  # an image in the transcript: PreCompact stores it in data/
        rows = transcript_rows(1)
        png = base64.b64encode(PNG).decode()
        source = {"type": "base64", "media_type": "image/png", "data": png}
        image = {"type": "image", "source": source}
        rows[0]["message"]["content"] = [{"type": "text", "text": "see"}, image]
        transcript = Path(payload["transcript_path"])
        transcript.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    done = hook_in_project(event, payload, project)
    assert_refused(done, event, os.path.join(".ctxoffload", inside), "symbolic link")
    assert snapshot_tree(outside) == {}


@pytest.mark.slow
def test_a_project_folder_reached_through_a_link_is_the_users_choice(tmp_path: Path) -> None:
    real = tmp_path / "real-project"
    real.mkdir()
    (tmp_path / "project").symlink_to(real)
    done = hook_in_project("PostToolUse", post_tool_use_bash(BIG), tmp_path / "project")
    head = output_of(done)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    (stored,) = (real / ".ctxoffload").glob("sessions/*/tool_result-*.txt")
    # Named under the project's folder as Claude Code knows it, where its Read tool reads.
    assert str(tmp_path / "project" / ".ctxoffload" / "sessions" / SESSION / stored.name) in head


@pytest.mark.parametrize("named_by", ["--workdir", "CTXOFFLOAD_WORKDIR"])
def test_a_workspace_the_user_names_may_be_a_link(tmp_path: Path, named_by: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "big-disk" / "workspace"
    elsewhere.mkdir(parents=True)
    link = tmp_path / "ws-link"
    link.symlink_to(elsewhere)
    payload = post_tool_use_bash(BIG)
    if named_by == "--workdir":
        done = run_hook("PostToolUse", payload, link)
    else:
        done = hook_in_project("PostToolUse", payload, project, {"CTXOFFLOAD_WORKDIR": str(link)})
    output_of(done)
    (stored,) = elsewhere.glob("sessions/*/tool_result-*.txt")
    assert stored.parent.name == SESSION
    assert stored.read_text(encoding="utf-8") == BIG
