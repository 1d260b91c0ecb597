"""`ctxoffload eval` on a transcript in one command (replayed under each strategy), with a
judge model, and on a session kept in a database or a bucket, against the deterministic
reader served on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_session import DEMO_SESSION, run_cli
from reader import answer_as_reader

from helpers import corpus_file
from openai_server import OpenAIServer
from s3_server import S3Server

TRANSCRIPT = "minisweagent-psf__requests-1142.traj.json"


def _json(*argv: str) -> dict[str, Any]:
    ran = run_cli(*argv, "--json")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


@pytest.mark.slow
def test_a_transcript_is_evaluated_under_every_strategy_in_one_command(
    reader_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is written here: the replays are temporary
    said_before: list[str] = []

    def answer(body: Any) -> Any:
        if not said_before:
            said_before.append(sys.stderr.getvalue())
        return answer_as_reader(body)

    reader_server.responder = answer
    report = _json(
        "eval", str(corpus_file(TRANSCRIPT)), "--model", f"{reader_server.base_url}/reader",
        "--strategies", "--max-calls", "1000",
    )  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    # The count was said before the first request, the written replay's summaries included.
    assert "under 5 strategies: at most" in said_before[0]
    assert "summaries for the written replay" in said_before[0]
    totals = {s["strategy"]: s["total"][0] for s in report["strategies"]}
    assert set(totals) == {"written", "extractive", "clearing", "window", "langchain"}
    assert report["calls"] == len(reader_server.requests)
    summaries = [
        r for r in reader_server.requests if "You are compressing" in json.dumps(r["messages"])
    ]
    assert summaries, "the written replay asked the model for no summary"
    # What drops the outputs scores lower than what keeps them readable.
    for dropping in ("window", "langchain"):
        for keeping in ("written", "extractive", "clearing"):
            assert totals[dropping]["one_read"] < totals[keeping]["one_read"], (dropping, keeping)
    assert report["ranking"][0] in ("written", "extractive", "clearing")
    for entry in report["strategies"]:
        for probe in entry["probes"]:
            assert probe["where"].split(":")[0] in ("context.jsonl",) or probe["where"].startswith(
                "tool_result-"
            )


@pytest.mark.slow
def test_max_calls_stops_a_transcripts_run_across_strategies(reader_server: OpenAIServer) -> None:
    report = _json(
        "eval", str(corpus_file(TRANSCRIPT)), "--model", f"{reader_server.base_url}/reader",
        "--strategies", "extractive,window", "--max-calls", "10",
    )  # fmt: skip
    assert len(reader_server.requests) <= 10
    assert report["calls"] == len(reader_server.requests)
    assert any(entry["not_asked"] for entry in report["strategies"])


def test_a_strategy_not_offered_is_refused_before_any_call(reader_server: OpenAIServer) -> None:
    for target, strategies in ((str(corpus_file(TRANSCRIPT)), "summary"), ("s", "written")):
        ran = run_cli(
            "eval", target, "--model", f"{reader_server.base_url}/reader",
            "--strategies", strategies,
        )  # fmt: skip
        assert ran.code == 2 and "choose among" in ran.err, ran.err
    assert reader_server.requests == []


@pytest.mark.slow
def test_a_judge_grades_the_open_probes(demo_workdir: Path, reader_server: OpenAIServer) -> None:
    base = reader_server.base_url
    report = _json(
        "--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", f"{base}/reader",
        "--judge", f"{base}/judge",
    )  # fmt: skip
    assert report["grading"] == "judge judge"
    judged = [r for r in reader_server.requests if r["model"] == "judge"]
    states = [p for p in report["probes"] if p["category"] == "state"]
    assert len(judged) == 2 * len(states) > 0
    for probe in states:
        # The reader reads the last step back, word for word: the strict judge agrees.
        assert probe["one_read"]["verdict"].startswith("CORRECT")
        assert probe["one_read"]["correct"]
        assert probe["no_tools"]["verdict"].startswith("INCORRECT")
    assert all("verdict" not in p["one_read"] for p in report["probes"] if p["category"] == "id")
    ran = run_cli(
        "--workdir", str(demo_workdir), "eval", DEMO_SESSION, "--model", f"{base}/reader",
        "--max-calls", "3",
    )  # fmt: skip
    assert "graded by their key terms (no --judge)" in ran.out


@pytest.mark.slow
def test_the_price_gives_a_cost_before_any_call(
    demo_workdir: Path, reader_server: OpenAIServer
) -> None:
    ran = run_cli(
        "--workdir", str(demo_workdir), "eval", DEMO_SESSION,
        "--model", f"{reader_server.base_url}/reader", "--price", "2.5", "--max-calls", "3",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    first = ran.err.splitlines()[0]
    assert "prompt tokens, about $" in first and "at $2.5 per million" in first


def _imported(demo_workdir: Path, url: str) -> None:
    ran = run_cli("import", str(demo_workdir), "--workdir", url)
    assert ran.code == 0, ran.err


def _one_read(workdir: str, server: OpenAIServer) -> dict[str, Any]:
    report = _json("--workdir", workdir, "eval", DEMO_SESSION, "--model", f"{server.base_url}/r")
    (total,) = report["total"]
    return total | {"probes": report["probes"]}


@pytest.mark.slow
def test_a_session_in_a_database_is_evaluated(
    demo_workdir: Path, reader_server: OpenAIServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    _imported(demo_workdir, url)
    total = _one_read(url, reader_server)
    assert total["asked"] > 0 and total["one_read"] == total["asked"]


@pytest.mark.slow
def test_a_session_in_a_bucket_is_evaluated_its_urls_read_from_the_copy(
    demo_workdir: Path,
    reader_server: OpenAIServer,
    s3: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{s3.new_bucket()}/agents"
    _imported(demo_workdir, url)
    total = _one_read(url, reader_server)
    assert total["asked"] > 0 and total["one_read"] == total["asked"]
    error = next(p for p in total["probes"] if p["category"] == "error")
    assert url in error["one_read"]["read"][0]  # the model named the bucket's object


def test_a_transcripts_probes_are_listed_without_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = _json("eval", str(corpus_file(TRANSCRIPT)), "--probes")
    probes = report["probes"]
    assert probes and {"command", "exit_status", "state"} <= {p["category"] for p in probes}
    assert all(p["where"] and p["answer"] for p in probes)
    assert list(tmp_path.iterdir()) == []  # the replay was temporary


def test_a_path_naming_no_file_is_refused() -> None:
    ran = run_cli("eval", "no/such/transcript.jsonl", "--probes")
    assert ran.code == 2
    assert "neither a session name nor a transcript file" in ran.err
