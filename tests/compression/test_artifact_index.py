"""The artifact index's time: the work of building it does not grow with what left beyond what
its budget can hold, its search for the layout that names the most stops when its clock says
(steps, or the compaction's `summary_timeout`), and an index out of time still fits its budget
and names each entry at the line of context.jsonl that holds it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._index import _artifact_index
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import FoundArtifact, find_artifacts
from ctxoffload.compression._index._search import IndexClock
from helpers import summary_reply

COUNTER = get_token_counter(exact=True)
EVENTS = "/ws/sessions/s1/events.jsonl"
_ROW = re.compile(r"^- line (\d+):(.*)$")


def listings(count: int, files: int = 250) -> list[Msg]:
    """`count` listings of `files` paths each, under eight packages, as a directory walk
    prints them: the shape of what a compaction of an agent exploring a repository drops."""
    return [
        Msg(
            role="user",
            content="\n".join(f"pkg{n % 8}/sub{k % 10}/module_{n}_{k}.py" for k in range(files)),
        )
        for n in range(count)
    ]


def leaving(msgs: list[Msg]) -> list[FoundArtifact]:
    """The artifacts of `msgs` leaving, message n on line n of context.jsonl."""
    return find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})[0]


def index_of(found: list[FoundArtifact], budget: int, **options: Any) -> ArtifactIndex:
    return ArtifactIndex.build(
        found,
        {},  # type: ignore[arg-type]
        summary_text="",
        kept=[],
        counter=options.pop("counter", COUNTER),
        budget=budget,
        events_file=EVENTS,
        **options,
    )


class Tally:
    """The exact counter, tallying the characters it is asked to count."""

    def __init__(self) -> None:
        self.characters = 0

    def count_text(self, text: str) -> int:
        self.characters += len(text)
        return COUNTER.count_text(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(COUNTER, name)


class Renders:
    """The indexes rendered (`renders`) and the entries they held (`entries`)."""

    def __init__(self) -> None:
        self.renders = 0
        self.entries = 0


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> Renders:
    """Counts what the index renders while it searches (every layout tried is rendered)."""
    seen = Renders()
    render_rows = _artifact_index.render_rows

    def counting(entries: Any, *args: Any) -> Any:
        seen.renders += 1
        seen.entries += len(entries)
        return render_rows(entries, *args)

    monkeypatch.setattr(_artifact_index, "render_rows", counting)
    return seen


def rows_read(text: str) -> dict[str, int]:
    """Each value of the index's line rows, with the line it names (the header's reading)."""
    named: dict[str, int] = {}
    for row in text.splitlines():
        if found := _ROW.match(row):
            words, *spaced = found.group(2).split(" | ")
            for value in [*filter(None, words.split(" ")), *spaced]:
                named[value] = int(found.group(1))
    return named


def placed_once(index: ArtifactIndex, found: list[FoundArtifact]) -> None:
    """Each artifact that left is in exactly one place, and listed for events.jsonl."""
    placed = [*index.in_summary, *index.in_kept, *index.entries, *index.cut]
    assert sorted((f.kind, f.value) for f in placed) == sorted((f.kind, f.value) for f in found)
    assert {(e["kind"], e["value"], e["line"]) for e in index.listing()} == {
        (f.kind, f.value, f.line) for f in found
    }


@pytest.mark.slow
def test_the_work_of_an_index_does_not_grow_with_what_left(rendered: Renders) -> None:
    """Sixteen times the paths (32,000 against 2,000) leave a 2,000-token index about as much
    to render and to count: what is weighed past the budget is bounded by what it holds, and
    the search renders indexes of about the size that fits (the index searched with renders
    of half of what left, and took minutes for 100,000 paths). So the work is bounded by
    what the index holds, whatever left."""
    for count in (8, 128):
        found = leaving(listings(count))
        rendered.entries, tally = 0, Tally()
        index = index_of(found, 2_000, counter=tally)
        text = index.render(EVENTS)
        assert COUNTER.count_text(text) <= 2_000
        assert len(index.entries) > 100 and index.folded
        placed_once(index, found)
        # Entries rendered while searching, against the entries the index holds: 10.0 of
        # 2,000 paths, 14.4 of 32,000 (12.0 and 14.0 where the fold search began at its
        # guess).
        assert rendered.entries <= 16 * len(index.entries), (len(found), rendered.entries)
        # Characters counted, against the index's own: each index rendered is counted once
        # however often the search renders it, and each value weighed once: 19.8 and 37.2
        # (where each index was counted again each time: 28 and 41).
        assert tally.characters <= 40 * len(text), (len(found), tally.characters, len(text))


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_an_index_out_of_steps_still_fits_and_names_each_entry_at_its_line(steps: int) -> None:
    """Out of steps, the index keeps the best it found: at the least, entries whole on their
    line's row (taken by the estimate, then fitted counted exactly); it fits its budget,
    every artifact is in one place with its line, and the report says it ran out."""
    msgs = listings(40, 50)
    found = leaving(msgs)
    index = index_of(found, 1_500, clock=IndexClock(steps=steps))
    text = index.render(EVENTS)
    assert index.out_of_time and index.report()["out_of_time"] is True
    assert COUNTER.count_text(text) <= 1_500
    placed_once(index, found)
    named = rows_read(text)
    for entry in index.entries:
        if (entry.kind, entry.value) not in index.folded:
            assert named[entry.value] == entry.line
            assert entry.value in msgs[entry.line - 1].text  # (message n is line n)
    # With time, the same index names more (folded into the tree of paths).
    timed = index_of(found, 1_500)
    assert not timed.out_of_time and "out_of_time" not in timed.report()
    assert len(timed.cut) < len(index.cut)


def test_an_index_with_no_steps_takes_no_step_of_its_search(rendered: Renders) -> None:
    """Steps are the indexes the search renders: with none, only the estimate and the fit
    counted exactly (a few renders, however many left) are left."""
    for count in (8, 64):
        rendered.renders = 0
        index = index_of(leaving(listings(count)), 2_000, clock=IndexClock(steps=0))
        assert index.out_of_time and not index.folded
        assert rendered.renders <= 16, (count, rendered.renders)


async def test_a_compaction_out_of_time_completes_with_the_index_whole_by_line(
    local_ws: LocalWorkspace,
) -> None:
    """`summary_timeout` bounds the whole compaction: a compaction with no time left falls
    back to the extractive summary without asking the model, and its index, out of time,
    is the cheap one: entries whole on their line's row, each on the line of context.jsonl
    that holds it, the rest listed in events.jsonl with their lines; the compression event
    says the index ran out of time."""
    model = ScriptedModel([], default=summary_reply("gist"))
    comp = Compressor(
        ContextConfig(context_window=8_000, summary_timeout=1e-9),
        model=model,
        offloader=local_ws,
        session_id="s1",
    )
    context = [Msg(role="system", content="You are a coding agent."), *listings(12, 40)]
    context.append(Msg(role="user", content="now fix it"))
    result = await comp.maybe_compress(context, force=True)
    assert result.compressed and result.summary_source == "extractive"
    assert model.calls == []  # no time was left to ask it
    events = [
        json.loads(line)
        for line in (local_ws.session_dir("s1") / "events.jsonl").read_text().splitlines()
    ]
    report = next(e for e in events if e["kind"] == "compression")["artifacts"]
    assert report["out_of_time"] is True and report["indexed"] > 0
    lines = (local_ws.session_dir("s1") / "context.jsonl").read_text().splitlines()
    index = result.messages[1].text.partition("<artifact_index>")[2]
    named = rows_read(index)
    assert len(named) == report["indexed"]
    for value, line in named.items():
        assert value in lines[line - 1]
    listed = next(e for e in events if e["kind"] == "artifacts")["artifacts"]
    assert len(listed) == report["left"]
    for entry in listed:
        assert entry["value"] in lines[entry["line"] - 1]


def test_entries_that_fit_after_others_leave_are_counted_in_batches(rendered: Renders) -> None:
    """400 commands, each reading a path that is an artifact of its own, within the budget
    of all the commands whole: the paths, taken first (the cheapest), are named by their
    commands once those are in, and the commands left out then are tried in growing batches,
    each counted once (one at a time, each counted, it took over a hundred renders)."""
    msgs = [
        Msg(role="user", content=f"```bash\ncat /srv/app/src/module_{n}.py | grep -n def_{n}\n```")
        for n in range(400)
    ]
    found = leaving(msgs)
    whole = index_of(found, 100_000, grouped=False)
    assert not whole.cut and len(whole.entries) == 400  # (each path named by its command)
    budget = COUNTER.count_text(whole.render(EVENTS))
    rendered.renders = 0
    index = index_of(found, budget, grouped=False)
    assert COUNTER.count_text(index.render(EVENTS)) <= budget
    placed_once(index, found)
    assert len(index.cut) <= len(found) // 8
    assert rendered.renders <= 30, rendered.renders


def test_what_a_build_remembers_of_its_renders_renders_what_a_fresh_render_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each index a build renders while it searches (kept by its entries, cut, tally and
    folding, laid out with what earlier renders worked out: `Layouts`) is the text a render
    without any of that makes: the rows folded in trees and commands' rows, whole on lines'
    rows, cut and filled, with the tally."""
    checked: list[int] = []
    render_with = ArtifactIndex.render_with

    def checking(self: ArtifactIndex, entries: Any, cut: int, events: Any, **kw: Any) -> str:
        text = render_with(self, entries, cut, events, **kw)
        fresh = self._render(entries, cut, events, kw.get("calls", False), None)
        assert text == fresh
        checked.append(len(entries))
        return text

    monkeypatch.setattr(ArtifactIndex, "render_with", checking)
    reads = [
        Msg(role="user", content=f"sed -n '{a},{a + 39}p' utils/m{a % 3}.ts and ./doc/x{a}.md")
        for a in range(1, 400, 40)
    ]
    # Values of every length on one line: the budget takes some of a line's and not others.
    mixed = [
        Msg(
            role="user",
            content=" ".join(f"src/{'deep/' * (k % 7)}f{n}_{k}.py ORD-{n}{k}" for k in range(12)),
        )
        for n in range(40)
    ]
    found = leaving(listings(6, 120) + reads + mixed)
    folded = 0
    for budget in (300, 900, 2_500):
        index = ArtifactIndex.build(
            found,
            {"Read": 3, "Bash": 9},  # type: ignore[arg-type]
            summary_text="",
            kept=[],
            counter=COUNTER,
            budget=budget,
            events_file=EVENTS,
            extra=budget // 2,
        )
        assert index.entries and index.cut
        assert index._renders is None  # (dropped once built)
        folded += len(index.folded)
    assert folded and len(checked) > 30 and max(checked) > 100


@pytest.mark.slow
def test_the_index_oracle_replays_what_it_recorded_byte_for_byte(tmp_path: Any) -> None:
    """bench/index_oracle.py, which checks a faster index against the old one's texts: what it
    records of the corpus replay's indexes, built again by the same code, is the same."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers import CORPUS, corpus_missing

    root = Path(__file__).resolve().parents[2]
    if not CORPUS.is_dir():
        pytest.skip(corpus_missing())
    store = tmp_path / "indexes.pickle"
    script = str(root / "bench" / "index_oracle.py")
    recorded = subprocess.run(
        [sys.executable, script, "record", str(store), "--windows", "32000", "--no-tests"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert re.search(r"recorded [1-9]\d* indexes", recorded.stdout)
    compared = subprocess.run(
        [sys.executable, script, "compare", str(store)], capture_output=True, text=True
    )
    assert compared.returncode == 0, compared.stdout
    assert compared.stdout.rstrip().endswith(": 0 differ")


def test_a_fold_search_that_cannot_name_more_stops_after_one_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paths that share no folder save nothing folded, and the header's rule costs more: one
    more than the whole entries name does not fit folded, so none of more does, and the search
    says so after that one index (it tried three or four); what the index holds is the whole
    entries' layout."""
    from ctxoffload.compression._index import _folding

    folds: list[int] = []
    fold = _folding.fold

    def counted(index: Any, order: Any, taken: int, *args: Any) -> Any:
        folds.append(taken)
        return fold(index, order, taken, *args)

    monkeypatch.setattr(_folding, "fold", counted)
    msgs = [
        Msg(role="user", content=f"wrote top{n}x/lib{n}q/report_{n}_final.csv") for n in range(90)
    ]
    found = leaving(msgs)
    index = index_of(found, 500)
    assert index.cut and not index.folded
    assert len(index.entries) >= _folding._PROBED_FROM
    assert folds == [len(index.entries) + 1]
    placed_once(index, found)
    assert COUNTER.count_text(index.render(EVENTS)) <= 500
