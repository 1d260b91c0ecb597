"""`show`, `ls` and `stats` fit 80 columns for a session of any door, and never break an id
(docs/cli.md; issue 83, item 1): here on records written directly, shaped as each newer door
writes them (a long ADK id, a LlamaIndex memory read again, smolagents' `New task:` and its
untimed calls, Haystack's stored results); `tests/integrations/test_contract.py` holds the
same over a session made through every door's real host."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload._disk.ids import session_id_for

Cli = Callable[..., Any]
WIDTH = 80
CONVERSATION = "ops/ana/5f0c2b8e-8d4e-4f55-9d8e-2a7c1b9f3e61"
"""An ADK conversation: app, user and the session id ADK made (a uuid)."""


def _write(workdir: Path, session: str, events: list[dict[str, object]]) -> Path:
    folder = workdir / "sessions" / session
    folder.mkdir(parents=True)
    lines = (json.dumps({"time": "2026-11-29T05:06:29.000Z", **e}) for e in events)
    (folder / "events.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


@pytest.fixture
def doors(tmp_path: Path) -> tuple[Path, list[str]]:
    """A workspace holding a session of each shape, and their ids."""
    workdir = tmp_path / "a-workspace-folder"
    adk = session_id_for(CONVERSATION)
    folder = workdir / "sessions" / adk
    reference = str(folder / "tool_result-call_80c4a8490a70.txt")
    records = (
        "what the memory gave the agent at each read (`ctxoffload show SESSION --step N` "
        "rebuilds it) and the tool results it stored; not the model calls (the agent adds "
        "this run's own steps to what it reads)"
    )
    _write(
        workdir,
        adk,
        [
            {
                "kind": "door",
                "door": "google-adk",
                "host": "Google ADK",
                "adapter": "ContextOffloadPlugin",
                "conversation": CONVERSATION,
                "projects": True,
                "records": records,
            },
            {
                "kind": "message",
                "message": {
                    "id": "m1",
                    "role": "user",
                    "content": "New task:\n"
                    "Find out why the nightly export job failed, and which order caused it.",
                },
            },
            {
                "kind": "model_call",
                "step": 1,
                "attempt": 1,
                "messages": ["m1"],
                "tokens_counted": 1793,
                "input_tokens": 1191,
                "outcome": "ok",
            },
            {
                "kind": "model_call",
                "step": 2,
                "attempt": 1,
                "messages": ["m1"],
                "tokens_counted": 591,
                "duration_ms": 11,
                "outcome": "projected",
                "reading": "memory",
            },
            {
                "kind": "model_call",
                "step": 2,
                "attempt": 2,
                "messages": ["m1"],
                "tokens_counted": 591,
                "duration_ms": 6,
                "outcome": "projected",
                "reading": "memory",
            },
            {
                "kind": "truncation",
                "tool_id": "call_80c4a8490a70",
                "tool_name": "fetch_logs",
                "reference": reference,
                "tokens_before": 655_388,
                "tokens_after": 289,
                "tokens_before_exact": False,
                "tokens_before_range": [20_560, 2_088_890],
                "lines_shown": 19,
                "lines_total": 60_000,
                "bytes_total": 2_088_890,
            },
            {
                "kind": "tool_result",
                "tool_id": "0_fetch_logs_call_418b60023882",
                "tool_name": "fetch_logs",
                "reference": str(folder / "tool_result-x.txt"),
                "lines": 610,
                "bytes": 20_000,
            },
        ],
    )
    (folder / "tool_result-call_80c4a8490a70.txt").write_text("12:00 INFO export\n" * 100)
    # A second session whose id begins as the first's: a shortened id must tell them apart.
    twin = adk[:30] + "-and-another-conversation-" + "0" * 16
    _write(workdir, twin, [{"kind": "model_call", "step": 1, "messages": [], "outcome": "ok"}])
    return workdir, [adk, twin]


def _printed(cli: Cli, monkeypatch: pytest.MonkeyPatch, *args: str | Path) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.delenv("NO_COLOR", raising=False)
    done = cli(*args)
    assert done.code == 0, done.err
    return done.out.splitlines()


def test_show_fits_eighty_columns_naming_each_id_and_file_whole(
    doors: tuple[Path, list[str]], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir, (adk, _) = doors
    lines = _printed(cli, monkeypatch, "--workdir", workdir, "show", adk)
    folder = f"  in {workdir / 'sessions' / adk}"
    assert lines[0] == f"session {adk}" and lines[1] == folder
    over = [line for line in lines[2:] if len(line) > WIDTH]
    assert over == [], "\n".join(lines)
    text = "\n".join(lines)
    # The conversation whole (what `show` finds it by), the file by its name in the folder.
    assert f"run of {CONVERSATION!r} by Google ADK" in " ".join(text.split())
    assert " tool_result-call_80c4a8490a70.txt" in text
    assert "user: New task: Find out why" in text
    assert "? ms" not in text
    assert "memory read again" in text and "attempt" not in text
    assert "20,560 tokens" in text and "2,088,890" not in text.split("stored")[0]


@pytest.mark.parametrize("command", ["ls", "stats"])
def test_a_table_shortens_an_id_in_its_middle_and_show_takes_it(
    doors: tuple[Path, list[str]], cli: Cli, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """An id too long for the column is shortened, `HEAD…TAIL`, never folded into pieces;
    `show` takes it as the session it stands for."""
    workdir, ids = doors
    lines = _printed(cli, monkeypatch, "--workdir", workdir, command)
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    firsts = [line.split()[0] for line in lines[1:] if line and not line.startswith(" ")]
    shortened = [cell for cell in firsts if "…" in cell]
    assert len(shortened) == 2, "\n".join(lines)
    for cell in shortened:
        found = cli("--workdir", workdir, "show", cell)
        assert found.code == 0, found.err
        (session,) = re.findall(r"^session (\S+)", found.out, re.M)
        head, tail = cell.split("…")
        assert session in ids and session.startswith(head) and session.endswith(tail)
    # No piece of an id on a line of its own: each line is a row, a header, or a folded time.
    assert not [line for line in lines if re.match(r"^\S+$", line) and line not in ids], "\n".join(
        lines
    )


def test_a_shortened_id_that_stands_for_two_sessions_is_refused_naming_them(
    doors: tuple[Path, list[str]], cli: Cli
) -> None:
    workdir, ids = doors
    both = ids[0][:12] + "…"
    done = cli("--workdir", workdir, "show", both)
    assert done.code == 2
    assert "may be any of 2 sessions" in done.err


def test_ls_counts_steps_as_show_numbers_them(doors: tuple[Path, list[str]], cli: Cli) -> None:
    """A memory read again within a step (LlamaIndex) is no step more: `ls` says 2 where
    `show` numbers steps 1 and 2 (it said 3)."""
    workdir, (adk, _) = doors
    rows = json.loads(cli("--workdir", workdir, "ls", "--json").out)
    assert next(row["steps"] for row in rows if row["session"] == adk) == 2
