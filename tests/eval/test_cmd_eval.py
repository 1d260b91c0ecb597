"""`ctxoffload eval` end to end through the command line, against the deterministic reader
served on 127.0.0.1 (a real OpenAI-compatible HTTP server)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_session import DEMO_SESSION, run_cli
from reader import answer_as_reader

from helpers import corpus_file, on_a_terminal
from openai_server import OpenAIServer, ScriptedReply

TRANSCRIPT = "minisweagent-psf__requests-1142.traj.json"


def _model(server: OpenAIServer) -> str:
    return f"{server.base_url}/reader"


def _evaluated(workdir: Path, session: str, server: OpenAIServer, *more: str) -> dict[str, Any]:
    ran = run_cli(
        "--workdir", str(workdir), "eval", session, "--model", _model(server), "--json", *more
    )
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def _check(report: dict[str, Any], server: OpenAIServer) -> None:
    assert report["probes"], "no probe was asked"
    for probe in report["probes"]:
        name, line = probe["where"].rsplit(":", 1)
        assert name == "context.jsonl" or name.startswith("tool_result-")
        assert int(line) >= 1
    (total,) = report["total"]
    assert total["one_read"] >= total["no_tools"]
    assert total["one_read"] > 0
    assert report["calls"] == len(server.requests)


@pytest.mark.slow
def test_the_demo_session_is_evaluated_with_and_without_one_read(
    demo_workdir: Path, reader_server: OpenAIServer
) -> None:
    report = _evaluated(demo_workdir, DEMO_SESSION, reader_server)
    _check(report, reader_server)
    error = next(p for p in report["probes"] if p["category"] == "error")
    # The failing line is in no context after the first compaction: only a read finds it.
    assert not error["no_tools"]["correct"]
    assert error["one_read"]["correct"]
    assert error["one_read"]["read"][0].startswith("Grep(")
    assert {p["compaction"] for p in report["probes"]} == {1, 2, 3, 4}


@pytest.mark.slow
def test_the_call_count_is_printed_before_the_first_request(
    demo_workdir: Path, reader_server: OpenAIServer
) -> None:
    said_before: list[str] = []

    def answer(body: Any) -> Any:
        if not said_before:
            said_before.append(sys.stderr.getvalue())  # the command's stderr, redirected
        return answer_as_reader(body)

    reader_server.responder = answer
    ran = run_cli(
        "--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", _model(reader_server)
    )
    assert ran.code == 0, ran.err
    assert "probes over 4 compactions: at most 18 model calls" in said_before[0]
    assert "one read" in ran.out and "compaction 1" in ran.out


@pytest.mark.slow
def test_max_calls_stops_the_run(demo_workdir: Path, reader_server: OpenAIServer) -> None:
    report = _evaluated(demo_workdir, DEMO_SESSION, reader_server, "--max-calls", "4")
    assert len(reader_server.requests) <= 4
    assert len(report["probes"]) == 1
    assert report["not_asked"]


@pytest.mark.slow
def test_probes_lists_without_calling_a_model(demo_workdir: Path) -> None:
    ran = run_cli("--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--probes", "--json")
    assert ran.code == 0
    probes = json.loads(ran.out)["probes"]
    assert probes and all(p["where"] and p["answer"] for p in probes)


def test_a_session_without_compaction_asks_nothing(
    tmp_path: Path, reader_server: OpenAIServer
) -> None:
    session = tmp_path / "sessions" / "quiet"
    session.mkdir(parents=True)
    event = {"time": "2026-11-29T00:00:00+00:00", "kind": "model_call", "step": 1, "messages": []}
    (session / "events.jsonl").write_text(json.dumps(event) + "\n")
    ran = run_cli("--workdir", str(tmp_path), "eval", "quiet", "--model", _model(reader_server))
    assert ran.code == 0, ran.err
    assert "made no compaction" in ran.out
    assert reader_server.requests == []


@pytest.mark.parametrize("session", ["../nightly-job", "/etc/passwd", "a\x00b", ""])
def test_a_hostile_session_id_is_refused_before_any_call(
    demo_workdir: Path, reader_server: OpenAIServer, session: str
) -> None:
    ran = run_cli("--workdir", str(demo_workdir), "eval", session, "--model", _model(reader_server))
    assert ran.code == 2
    assert reader_server.requests == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(500, {"error": {"message": "boom"}}),
        ScriptedReply(200, "not a completion at all"),
        ScriptedReply(200, {"choices": []}),
        ScriptedReply(200, {"choices": [{"message": {"role": "assistant"}}]}, delay=5.0),
    ],
    ids=["500", "garbage", "no-choice", "hangs"],
)
def test_a_broken_server_stops_the_run_with_a_clear_error(
    demo_workdir: Path, reply: ScriptedReply
) -> None:
    with OpenAIServer() as server:
        server.add(*[reply] * 3)
        ran = run_cli(
            "--workdir",
            str(demo_workdir),
            "eval",
            DEMO_SESSION,
            "--model",
            _model(server),
            "--timeout",
            "1",
        )
    assert ran.code == 1, (ran.code, ran.err)
    assert "the run stopped" in ran.err
    assert len(server.requests) == 1
    assert "Traceback" not in ran.err


@pytest.mark.slow
def test_a_key_in_the_url_is_never_printed(demo_workdir: Path, reader_server: OpenAIServer) -> None:
    secret = "sk-test-0123456789abcdefSECRET"
    model = _model(reader_server).replace("http://", f"http://user:{secret}@")
    ran = run_cli(
        "--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", model, "--max-calls", "3"
    )
    assert secret not in ran.out + ran.err
    ran = run_cli(
        "--workdir",
        str(demo_workdir),
        "eval",
        DEMO_SESSION,
        "--model",
        model + "/",
        "--timeout",
        "1",
    )
    assert secret not in ran.out + ran.err


@pytest.mark.slow
def test_a_replayed_corpus_transcript_is_evaluated(
    tmp_path: Path, reader_server: OpenAIServer
) -> None:
    workdir = tmp_path / "ws"
    ran = run_cli("--workdir", str(workdir), "replay", str(corpus_file(TRANSCRIPT)))
    assert ran.code == 0, ran.err
    (session,) = [p.name for p in (workdir / "sessions").iterdir()]
    report = _evaluated(workdir, session, reader_server)
    _check(report, reader_server)
    assert {"command", "exit_status"} <= {p["category"] for p in report["probes"]}


def _strategies(workdir: Path, session: str, server: OpenAIServer, *more: str) -> dict[str, Any]:
    report = _evaluated(workdir, session, server, "--strategies", *more)
    assert sum(s["calls"] for s in report["strategies"]) == report["calls"]
    assert report["calls"] == len(server.requests)
    return {s["strategy"]: s["total"][0] for s in report["strategies"]} | {
        "ranking": report["ranking"]
    }


@pytest.mark.slow
def test_a_strategy_that_keeps_no_copy_ranks_last_on_the_demo(
    demo_workdir: Path, reader_server: OpenAIServer
) -> None:
    totals = _strategies(demo_workdir, DEMO_SESSION, reader_server)
    assert set(totals["ranking"]) == {"summary", "clearing", "window", "langchain"}
    assert set(totals["ranking"][-2:]) == {"window", "langchain"}
    for dropping in ("window", "langchain"):
        assert totals[dropping]["one_read"] < totals["clearing"]["one_read"]
        assert totals[dropping]["one_read"] < totals["summary"]["one_read"]
    # LangChain's strategy pays for its summaries: one per compaction, in its tokens.
    assert totals["langchain"]["tokens_summaries"] > 0 == totals["window"]["tokens_summaries"]


@pytest.mark.slow
def test_the_strategies_rank_as_the_files_do_on_a_corpus_transcript(
    tmp_path: Path, reader_server: OpenAIServer
) -> None:
    workdir = tmp_path / "ws"
    assert (
        run_cli(
            "--workdir", str(workdir), "replay", str(corpus_file(TRANSCRIPT)), "--session", "t"
        ).code
        == 0
    )
    totals = _strategies(workdir, "t", reader_server)
    assert set(totals["ranking"][-2:]) == {"window", "langchain"}
    for keeping in ("summary", "clearing"):
        for dropping in ("window", "langchain"):
            assert totals[keeping]["one_read"] > totals[dropping]["one_read"]
        assert totals[keeping]["one_read"] >= totals[keeping]["no_tools"]


@pytest.mark.parametrize(
    "model", ["http://127.0.0.1:1/", "http://127.0.0.1:1/v1/", "https://", " "]
)
def test_a_model_url_naming_no_model_is_refused(demo_workdir: Path, model: str) -> None:
    ran = run_cli("--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", model)
    assert ran.code == 2
    assert "--model" in ran.err and "Traceback" not in ran.err


@pytest.mark.slow
def test_a_planted_link_is_never_read_through(demo_workdir: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "ws"
    shutil.copytree(demo_workdir, workdir)
    session = workdir / "sessions" / DEMO_SESSION
    secret = tmp_path / "secret.txt"
    secret.write_text("ERROR the secret outside the workspace SEC-12345\n")
    (session / "tool_result-call_2.txt").unlink()
    (session / "tool_result-call_2.txt").symlink_to(secret)
    ran = run_cli("--workdir", str(workdir), "eval", DEMO_SESSION, "--probes", "--json")
    assert ran.code == 0, ran.err
    assert "SEC-12345" not in ran.out and "Traceback" not in ran.err
    (session / "events.jsonl").rename(tmp_path / "events.jsonl")
    (session / "events.jsonl").symlink_to(tmp_path / "events.jsonl")
    ran = run_cli("--workdir", str(workdir), "eval", DEMO_SESSION, "--probes")
    assert ran.code != 0
    assert "Traceback" not in ran.err and ran.err.count("\n") == 1


@pytest.mark.slow
def test_progress_is_one_line_on_a_terminal_and_a_line_a_tenth_in_a_pipe(
    demo_workdir: Path, reader_server: OpenAIServer
) -> None:
    argv = ["--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", _model(reader_server)]
    piped = run_cli(*argv)
    assert piped.code == 0, piped.err
    planned = int(re.search(r"(\d+) probes? over", piped.err).group(1))  # type: ignore[union-attr]
    counted = [line for line in piped.err.splitlines() if re.search(r"\d+/\d+ probes", line)]
    assert 1 <= len(counted) <= 10
    assert counted[-1].startswith(f"ctxoffload eval: {planned}/{planned} probes (compaction ")
    code, terminal = on_a_terminal(argv, dict(os.environ), stderr_too=True, columns=60)
    assert code == 0
    drawn = terminal.decode()
    assert "\r" not in piped.err
    frames = drawn.split("\r\x1b[K")
    assert f"[##########] {planned}/{planned} " in drawn
    # Each frame is drawn over the last, within the terminal's width (a frame that wrapped
    # would leave its first row behind); the last clears the line, and the report follows.
    assert all(len(frame) < 60 for frame in frames[1:-1])
    assert not frames[-1].startswith("ctxoffload eval") and "compaction 1" in frames[-1]
