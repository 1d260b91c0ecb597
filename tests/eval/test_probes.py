"""Probes from a session's record: what left at each compaction, and where it lives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_session import DEMO_SESSION

from ctxoffload.eval._probes import normalised, probes_of, state_at_the_cut
from ctxoffload.eval._record import Compaction, SessionRecord, read_record
from ctxoffload.text import message_text


def _line(session: Path, where: str) -> str:
    name, number = where.rsplit(":", 1)
    with (session / name).open(encoding="utf-8") as file:
        for index, line in enumerate(file, start=1):
            if index == int(number):
                return line
    raise AssertionError(f"{where} names no line")


@pytest.mark.slow
def test_every_probe_names_the_line_that_holds_its_answer(demo_workdir: Path) -> None:
    record = read_record(str(demo_workdir), DEMO_SESSION)
    probes = list(probes_of(record))
    assert {p.category for p in probes} >= {"error", "id", "state"}
    session = demo_workdir / "sessions" / DEMO_SESSION
    for probe in probes:
        line = _line(session, probe.where)
        if probe.category == "state":
            assert probe.answer == state_at_the_cut(json.loads(line)), probe
            continue
        if probe.where.startswith("context.jsonl:"):
            line = message_text(json.loads(line))
        assert normalised(probe.answer) in normalised(line), probe


@pytest.mark.slow
def test_a_probe_is_never_about_what_the_context_still_holds(demo_workdir: Path) -> None:
    record = read_record(str(demo_workdir), DEMO_SESSION)
    for probe in probes_of(record):
        compaction = record.compactions[probe.compaction - 1]
        after = normalised("\n".join(message_text(m) for m in compaction.sent))
        assert len(probe.answer) < 4 or normalised(probe.answer) not in after
        if probe.where.startswith("context.jsonl:"):
            first, last = compaction.lines
            assert first <= int(probe.where.rsplit(":", 1)[1]) <= last
    # The user's request stays pinned in the context, and the listed folder is in every
    # summary: neither left, so neither is asked.
    asked = [p.answer for p in probes_of(record)]
    assert not any("nightly export job failed" in a for a in asked)
    assert "/srv/jobs/nightly" not in asked


@pytest.mark.slow
def test_a_stored_result_is_asked_from_its_file(demo_workdir: Path) -> None:
    probes = list(probes_of(read_record(str(demo_workdir), DEMO_SESSION)))
    error = next(p for p in probes if p.category == "error")
    assert error.where.startswith("tool_result-call_2.txt:")
    assert "ORD-58213" in error.answer
    assert next(p for p in probes if p.category == "id").answer == "ORD-58213"


@pytest.mark.slow
def test_the_same_record_gives_the_same_probes(demo_workdir: Path) -> None:
    first = list(probes_of(read_record(str(demo_workdir), DEMO_SESSION)))
    assert first == list(probes_of(read_record(str(demo_workdir), DEMO_SESSION)))


def test_a_session_without_compaction_has_no_probe(tmp_path: Path) -> None:
    session = tmp_path / "sessions" / "quiet"
    session.mkdir(parents=True)
    event = {"time": "2026-11-29T00:00:00+00:00", "kind": "model_call", "step": 1, "messages": []}
    (session / "events.jsonl").write_text(json.dumps(event) + "\n")
    record = read_record(str(tmp_path), "quiet")
    assert record.compactions == []
    assert list(probes_of(record)) == []


@pytest.mark.slow
def test_the_state_is_the_agents_last_step_before_the_cut(demo_workdir: Path) -> None:
    record = read_record(str(demo_workdir), DEMO_SESSION)
    states = [p for p in probes_of(record) if p.category == "state"]
    assert len(states) == len(record.compactions)
    session = demo_workdir / "sessions" / DEMO_SESSION
    for probe in states:
        compaction = record.compactions[probe.compaction - 1]
        line = int(probe.where.rsplit(":", 1)[1])
        message = json.loads(_line(session, probe.where))
        # The agent's own message, the last of its messages in the span that left...
        assert message["role"] == "assistant"
        assert not any(m.get("role") == "assistant" for n, m in compaction.left if n > line)
        # ...worded as what it said, then the tool it called and with what.
        (call,) = [b for b in message["content"] if b["type"] == "tool_call"]
        assert probe.answer.endswith(f"Then called {call['name']} with {json.dumps(call['input'])}")
    assert states[0].answer.startswith("Which orders failed? Then called query_api")


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _record(*compactions: list[dict[str, object]]) -> SessionRecord:
    """A session whose compactions each moved these messages out, numbered by their line of
    context.jsonl in order, and sent nothing that holds them."""
    made, line = [], 0
    for number, left in enumerate(compactions, start=1):
        numbered = [(line + i, message) for i, message in enumerate(left, start=1)]
        line += len(left)
        made.append(Compaction(number, (numbered[0][0], line), numbered, step=number * 2))
    return SessionRecord("/nowhere", "s", "sessions/s", made, stored={}, tools=[])


def test_the_task_is_the_users_first_request_never_a_hosts_preamble_or_an_output() -> None:
    """Codex sends its environment first and a request from an IDE under a heading;
    mini-swe-agent sends each command's output back as user text; a later "ok continue" is a
    request, but not what the session was for: the task is the first request, read as the
    extractive summary reads one, asked once, where it left."""
    codex = _record(
        [
            _user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"),
            _user(
                "# Context from my IDE setup:\n\n## Open tabs:\n- a.ts\n\n"
                "## My request for Codex:\nMigrate the app from supabase to prisma."
            ),
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
        ],
        [
            _user("<returncode>0</returncode>\n<output>\nok\n</output>"),
            _user("ok continue"),
            {"role": "assistant", "content": [{"type": "text", "text": "Continuing."}]},
        ],
    )
    tasks = [p for p in probes_of(codex) if p.category == "task"]
    assert [(p.compaction, p.answer, p.where) for p in tasks] == [
        (1, "Migrate the app from supabase to prisma.", "context.jsonl:2")
    ]
    # A session whose first request is an output's echo alone asks no task at all.
    outputs = _record([_user("<returncode>1</returncode>\n<output>boom</output>")])
    assert [p for p in probes_of(outputs) if p.category == "task"] == []


def _call(call_id: str, command: object) -> dict[str, object]:
    block = {"type": "tool_call", "id": call_id, "name": "shell", "input": {"command": command}}
    return {"role": "assistant", "content": [block]}


def test_a_command_passed_as_an_argument_vector_is_asked_as_the_command_it_runs() -> None:
    """Codex passes a shell call's command as a vector (`["bash", "-lc", SCRIPT]`): its
    commands were never asked. The command is the script a shell is given with `-c`, or the
    words as a shell reads them; a vector of anything but words is no command."""
    record = _record(
        [
            _user("Find the supabase clients."),
            _call("c1", ["bash", "-lc", "sed -n '1,200p' client.ts"]),
            _call("c2", ["git", "log", "--format=%h %s", "-3"]),
            _call("c3", ["/bin/zsh", "-c", "ls src"]),
            _call("c4", ["bash", 7]),
        ]
    )
    asked = {
        p.question.split("tool call ")[1].split()[0]: p.answer
        for p in probes_of(record)
        if p.category == "command"
    }
    assert asked == {
        "c1": "sed -n '1,200p' client.ts",
        "c2": "git log '--format=%h %s' -3",
        "c3": "ls src",
    }
