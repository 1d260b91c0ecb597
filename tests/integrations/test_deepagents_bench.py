"""bench/bench_peers.py, the side-by-side with LangChain's built-ins and deepagents, starts in
the deepagents environment (it imports the tests' helpers, which moved once under it and left
it unable to start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("deepagents", "deepagents")

ROOT = Path(__file__).resolve().parents[2]


def generated(folder: Path, *shapes: str) -> tuple[Any, list[Any]]:
    """The bench's module, and one run of each of `shapes` generated into `folder` from the
    bench's seed (`transcript_shapes.py`), read as the bench reads a corpus."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_peers
        import transcript_shapes
    finally:
        sys.path.remove(str(ROOT / "bench"))
    transcript_shapes.write(folder, transcript_shapes.SEED, 1, shapes)
    return bench_peers, bench_peers.scripts(None, folder)


def test_the_peers_bench_starts_and_says_its_options() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_peers.py"), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "--strategies" in done.stdout
    assert "--corpus" in done.stdout


def test_a_what_if_is_a_json_object_of_the_configs_fields() -> None:
    # `--what-if` measures a choice against the guide's example: a list is refused before any
    # replay, and a field ContextConfig does not have stops the bench naming it.
    bench = [sys.executable, str(ROOT / "bench" / "bench_peers.py")]
    done = subprocess.run(
        [*bench, "--what-if", "[1]"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 2
    assert "--what-if takes a JSON object" in done.stderr
    shape = ["--shapes", "swe", "--shape-runs", "1", "--windows", "8000"]
    done = subprocess.run(
        [*bench, "--what-if", '{"no_such_field": 1}', *shape, "--strategies", "ctxoffload"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode != 0
    assert "what-if, not the guide's example" in done.stdout
    assert "no_such_field" in done.stderr


def test_the_scripted_summariser_answers_every_field_the_summary_schema_requires(
    tmp_path: Path,
) -> None:
    # The bench measures the guide's example with its own model writing the summaries: the
    # scripted model answers ctxoffload's structured-output call in the shape asked, all five
    # fields. Answering one field made every compaction fill the four others from the extract,
    # a path a model held to the schema never takes, and the bench charged it to the example.
    bench_peers, (script,) = generated(tmp_path / "corpus", "swe")
    outcome = bench_peers.replay_run("ctxoffload", 8_000, script, tmp_path / "run")
    assert not outcome.ended
    origins = [
        event["summary_origin"]
        for log in (tmp_path / "run").rglob("events.jsonl")
        for event in map(json.loads, log.read_text().splitlines())
        if "summary_origin" in event
    ]
    assert len(origins) >= 3  # the run compacts several times at 8,000 tokens
    for origin in origins:
        assert origin["source"] == "model", origin
        assert origin["reply"] == "json", origin
        assert origin["filled"] == [], origin


def test_the_guides_example_checkpoints_no_more_than_deepagents_and_names_all_that_left(
    tmp_path: Path,
) -> None:
    # What issue 84 measured on the corpus, held on runs the bench generates (the corpus is
    # not in a fresh clone): through the LangChain guide's first example as written, a run
    # ends, everything that left the context is found again in what ctxoffload keeps, in a
    # file the last request names, and LangGraph's checkpoints hold no more than deepagents'
    # with WorkspaceBackend, the leanest peer. The sub-agents shape once broke the last: each
    # fresh report cut to fit checkpointed every message of the request again (280 KB
    # against 183 KB at 8,000 tokens).
    bench_peers, scripts = generated(tmp_path / "corpus", "subagents", "swe")
    for script in scripts:
        ours = bench_peers.replay_run("ctxoffload", 8_000, script, tmp_path / script.name / "a")
        peer = bench_peers.replay_run("deepagents+WB", 8_000, script, tmp_path / script.name / "b")
        assert ours.ended is None and peer.ended is None, (ours.ended, peer.ended)
        assert ours.left > 0  # the run is compacted at 8,000 tokens
        assert ours.recoverable == ours.named == ours.left, (script.name, vars(ours))
        assert ours.checkpoint_bytes <= peer.checkpoint_bytes, (
            script.name,
            ours.checkpoint_bytes,
            peer.checkpoint_bytes,
        )
