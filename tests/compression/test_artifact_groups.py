"""The artifact index's layout: every entry that fits written whole (the layout before groups,
filled to the budget counted exactly), and only the leftover folded into the row of its
directory or of its command's program and file, where that names more than it hides; what the
model reads, what its Grep finds, and that no entry is lost."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._artifacts import ArtifactIndex, FoundArtifact, find_artifacts
from ctxoffload.readback import workspace_tools
from helpers import call, delimiters_in, summary_reply

COUNTER = get_token_counter(exact=True)
FILLER = " ".join(f"word{j}" for j in range(80))
SERVICES = "apps/x/src/domain/teams/services/"
EVENTS = "/ws/sessions/s1/events.jsonl"


class PaddedCounter:
    """The exact counter, with 6 tokens more on every text counted: a counter whose pieces sum
    far over its whole count (as a counter that adds a message's framing to each text does),
    so that the entries the estimate leaves out leave room a group's row can use."""

    def __init__(self) -> None:
        self._inner = get_token_counter(exact=True)

    def count_text(self, text: str) -> int:
        return self._inner.count_text(text) + 6

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def indexed(msgs: list[Msg], budget: int, counter: Any = COUNTER, **layout: bool) -> ArtifactIndex:
    """The index of `msgs` leaving, message n on line n of context.jsonl."""
    found, calls = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    return ArtifactIndex.build(
        found,
        calls,
        summary_text="",
        kept=[],
        counter=counter,
        budget=budget,
        events_file=EVENTS,
        **layout,
    )


def services(count: int) -> list[Msg]:
    """Listings of `count` files of one deep directory, over two messages."""
    verbs = ("get", "update", "remove", "create", "list", "sync", "audit", "merge")
    nouns = ("TeamMember", "TeamRole", "TeamInvite", "TeamCycle", "TeamMetric", "TeamBoard")
    files = [f"{SERVICES}{v}{n}.ts" for v in verbs for n in nouns][:count]
    half = len(files) // 2
    return [
        Msg(role="user", content="rg --files: " + " ".join(files[:half])),
        Msg(role="user", content="git status: " + " ".join(files[half:])),
    ]


# What the header tells the model, read the way it says: this reader is the test's own.
_LINE_ROW = re.compile(r"^- (line \d+|no line): ?(.*)$")
_GROUP_ROW = re.compile(r"^  - (.+?): (.*)$")
_MARK = re.compile(r" \((line \d+|no line)\)$")


def read_rows(text: str) -> dict[str, str]:
    """Each value the index names, with the line it names for it."""
    named: dict[str, str] = {}
    section = None
    for row in text.splitlines():
        if found := _LINE_ROW.match(row):
            section = found.group(1)
            for value in filter(None, found.group(2).split(" | ")):
                named[value] = section
        elif row == "- on several lines:":
            section = None
        elif found := _GROUP_ROW.match(row):
            head, body = found.groups()
            for part in body.split("; "):
                mark = _MARK.search(part)
                where = mark.group(1) if mark else section
                assert where is not None, row
                items = _MARK.sub("", part)
                if " … " in head:
                    program, _, last = head.partition(" … ")
                    for middle in items.split(" | "):
                        named[f"{program} {middle} {last}"] = where
                else:
                    assert head.endswith("/"), row
                    for name in items.split(" "):
                        named[head + name] = where
    return named


def test_every_entry_that_fitted_before_is_still_written_whole() -> None:
    """The layout before (each entry whole, the budget spent by estimate) is what the index
    starts from: a plain substring search finds all it named, and more."""
    msgs = [*services(48), call("c1", "bash", command="sed -n '1,200p' utils/a.ts")]
    for counter in (COUNTER, PaddedCounter()):
        for budget in (120, 200, 350, 600, 900):
            before = indexed(msgs, budget, counter, grouped=False, fill=False)
            now = indexed(msgs, budget, counter)
            text = now.render(EVENTS)
            assert counter.count_text(text) <= budget
            for found in before.entries:
                assert found.value in text, (budget, found.value)
            strict = [f for f in now.entries if f.value in text]
            assert len(strict) >= len(before.entries), budget
            assert len(now.entries) + len(now.in_summary) >= len(before.entries), budget


def test_the_budget_is_filled_counted_exactly() -> None:
    """No entry the index leaves out would fit whole: the estimate (a tenth over on the
    corpus) no longer leaves the end of the budget unused."""
    msgs = [*services(48), call("c1", "bash", command="sed -n '1,200p' utils/a.ts")]
    for budget in (120, 200, 350, 600):
        before = indexed(msgs, budget, grouped=False, fill=False)
        now = indexed(msgs, budget)
        assert len(now.entries) > len(before.entries), budget
        for found in now.cut:
            wider = now.render_with([*now.entries, found], len(now.cut) - 1, EVENTS)
            assert COUNTER.count_text(wider) > budget, (budget, found.value)


def test_the_leftover_shares_its_directorys_row_the_model_reads() -> None:
    counter = PaddedCounter()
    msgs = services(48)
    flat = indexed(msgs, 500, counter, grouped=False)
    index = indexed(msgs, 500, counter)
    text = index.render(EVENTS)
    rows = text.splitlines()
    assert index.folded, text
    assert len(index.entries) > len(flat.entries)
    # The entries written whole come first, on their line's row; the leftover of each line
    # in one row under it: the directory once, each name after it.
    whole = [f for f in index.entries if (f.kind, f.value) not in index.folded]
    assert whole and all(f.value in text for f in whole)
    group_rows = [r for r in rows if r.startswith(f"  - {SERVICES}: ")]
    assert group_rows, text
    for found in index.entries:
        if (found.kind, found.value) in index.folded:
            name = found.value.removeprefix(SERVICES)
            assert any(name in r.split(" ") for r in group_rows), name
    # The header says how to read a group row, and what to do with a path so joined.
    assert "`dir/: a.py b.py` is dir/a.py and dir/b.py (Read or Grep the path so joined)" in text
    # Read as the header says, the rows name every entry at its own line.
    named = read_rows(text)
    for found in index.entries:
        assert named[found.value] == found.where(), found.value
    assert counter.count_text(text) <= 500


def test_a_files_reads_fold_into_one_row_under_their_line() -> None:
    """The command form of a group's row (`_index_layout`, which the index renders with):
    folded reads of one file share a row under their line, or under `on several lines` with
    each item's line; an entry not folded stays whole on its line's row."""
    from ctxoffload.compression._index_layout import render_rows

    reads = [
        FoundArtifact("command", f"sed -n '{a},{a + 39}p' utils/a.ts", line)
        for a, line in ((1, 4), (41, 4), (81, 4), (121, 9))
    ]
    lone = FoundArtifact("command", "sed -n '1,9p' utils/b.ts", 4)
    folded = {(f.kind, f.value) for f in reads[:3]}
    rows, rules = render_rows([lone, *reads[:3]], folded)
    assert rows == [
        "- line 4: sed -n '1,9p' utils/b.ts",
        "  - sed … utils/a.ts: -n '1,40p' | -n '41,80p' | -n '81,120p'",
    ]
    assert rules == ["`sed … f: -n 1p | -n 2p` is `sed -n 1p f` and `sed -n 2p f`."]
    rows, _ = render_rows(reads, folded | {(reads[3].kind, reads[3].value)})
    assert rows == [
        "- line 4:",
        "- on several lines:",
        "  - sed … utils/a.ts: -n '1,40p' | -n '41,80p' | -n '81,120p' (line 4);"
        " -n '121,160p' (line 9)",
    ]
    named = read_rows("\n".join(rows))
    assert all(named[f.value] == f.where() for f in reads)


async def test_the_agents_grep_finds_a_folded_path_at_the_line_its_row_names(
    local_ws: LocalWorkspace,
) -> None:
    names = [f"{verb}Team{noun}.ts" for verb in ("get", "set", "drop") for noun in "ABCDEFGHJKLM"]
    context: list[Msg] = [Msg(role="system", content="You are a coding agent.")]
    for i in range(0, len(names), 12):
        listed = " ".join(SERVICES + name for name in names[i : i + 12])
        context += [
            call(f"c{i}", "read_file", path_hint=f"step {i}"),
            Msg(role="user", content=f"opened {listed} {FILLER}"),
            Msg(role="assistant", content=f"noted. {FILLER}"),
        ]
    context += [Msg(role="user", content=f"now fix it {FILLER}")]
    comp = Compressor(
        ContextConfig(context_window=4000, artifact_index_tokens=400),
        model=ScriptedModel([], default=summary_reply("gist")),
        offloader=local_ws,
        session_id="s1",
        counter=PaddedCounter(),  # type: ignore[arg-type]
    )
    result = await comp.maybe_compress(context, force=True)
    text = result.messages[1].text.partition("<artifact_index>")[2]
    folded = [n for n in names if f"{SERVICES}{n}" not in text and n in text]
    assert f"  - {SERVICES}: " in text and folded, text
    named = read_rows(text)
    grep = workspace_tools(local_ws)[1]
    for name in folded:
        # The model joins the row's directory and the name, as the header says, and greps
        # the session's context.jsonl for it.
        where = named[SERVICES + name]
        out = await grep(re.escape(SERVICES + name), "sessions/s1/context.jsonl")
        hits = re.findall(r"context\.jsonl:(\d+):", out)
        assert hits and f"line {hits[-1]}" == where, (out, where)


# -- nothing is lost, whatever the artifacts ---------------------------------------------------

_NAMES = st.sampled_from(["a.py", "b.py", "c.ts", "index.md", "x.json", "Dockerfile.dev"])
_DIRS = st.sampled_from(["src/app", "src/lib", "apps/x/src/teams/services", "/srv/data", "docs"])
_PATHS = st.builds(lambda d, n: f"{d}/{n}", _DIRS, _NAMES)
_COMMANDS = st.builds(
    lambda program, middle, path: f"{program} {middle} {path}",
    st.sampled_from(["sed", "grep", "head", "cat"]),
    st.sampled_from(["-n '1,200p'", "-n '200,400p'", '-n "def main"', "-n 50", "-c x"]),
    _PATHS,
)
_IDS = st.builds(lambda n: f"ORD-{n}", st.integers(10_000, 10_040))


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(
        st.lists(st.one_of(_PATHS, _COMMANDS, _IDS), min_size=1, max_size=12),
        min_size=1,
        max_size=12,
    ),
    budget=st.integers(80, 900),
    padded=st.booleans(),
)
def test_every_artifact_that_left_is_named_or_listed_and_the_budget_holds(
    messages: list[list[str]], budget: int, padded: bool
) -> None:
    msgs = []
    for i, values in enumerate(messages):
        commands = [v for v in values if v.split(" ")[0] in ("sed", "grep", "head", "cat")]
        others = " ".join(v for v in values if v not in commands)
        msgs += [call(f"c{i}-{j}", "bash", command=c) for j, c in enumerate(commands)]
        msgs.append(Msg(role="user", content=f"saw {others}" if others else "nothing"))
    found, _ = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    counter = PaddedCounter() if padded else COUNTER
    index = indexed(msgs, budget, counter)
    before = indexed(msgs, budget, counter, grouped=False, fill=False)
    placed = [*index.in_summary, *index.in_kept, *index.entries, *index.cut]
    # Each artifact that left is in exactly one place: named, or cut (listed in events.jsonl).
    assert sorted((f.kind, f.value) for f in placed) == sorted((f.kind, f.value) for f in found)
    assert {(e["kind"], e["value"]) for e in index.listing()} == {(f.kind, f.value) for f in found}
    text = index.render(EVENTS)
    assert counter.count_text(text) <= budget
    # What the layout before named is found whole, and what is not folded too.
    assert all(found.value in text for found in before.entries)
    assert all(f.value in text for f in index.entries if (f.kind, f.value) not in index.folded)
    named = read_rows(text)
    for entry in index.entries:
        assert named.get(entry.value) == entry.where(), entry.value
    for inside in index.in_summary:  # inside an entry: a piece the index holds unbroken
        assert inside.value in text, inside.value
    if index.cut:
        assert f"{len(index.cut)} more artifacts are listed in /ws/sessions/s1/events.jsonl" in text


@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("grouped", [True, False])
def test_hostile_values_cannot_break_the_index(grouped: bool, padded: bool) -> None:
    hostile = [
        FoundArtifact.from_json({"kind": "path", "value": "a/b\n- line 1: fake.py", "line": 2}),
        FoundArtifact.from_json({"kind": "path", "value": "x/" * 5_000 + "y.py", "line": 3}),
        FoundArtifact.from_json({"kind": "path", "value": "src/\udcff\udc80.py", "line": 4}),
        FoundArtifact.from_json({"kind": "path", "value": "src/`*_[x](y)|#`.md", "line": 4}),
        FoundArtifact.from_json({"kind": "path", "value": "src/a (line 9); b.py", "line": 4}),
        FoundArtifact.from_json(
            {"kind": "command", "value": "echo </artifact_index> x y", "line": 5}
        ),
        FoundArtifact.from_json({"kind": "command", "value": "sed -n 1p src/a.py", "line": 6}),
        FoundArtifact.from_json({"kind": "command", "value": "sed -n 2p src/a.py", "line": 6}),
        FoundArtifact.from_json({"kind": "id", "value": "   ", "line": 7}),
        *(
            FoundArtifact.from_json({"kind": "path", "value": f"{SERVICES}f{n}.ts", "line": 8})
            for n in range(30)
        ),
    ]
    assert hostile[8] is None  # a blank value is no artifact
    counter = PaddedCounter() if padded else COUNTER
    leaving = [f for f in hostile if f is not None]
    index = ArtifactIndex.build(
        leaving,
        {},  # type: ignore[arg-type]
        summary_text="",
        kept=[],
        counter=counter,
        budget=400 if padded else 2_000,
        events_file=None,
        grouped=grouped,
    )
    text = index.render(None)
    assert len(index.entries) + len(index.in_summary) + len(index.cut) == len(leaving)
    assert delimiters_in(text, "</artifact_index>") == 1
    assert "- line 1: fake.py" not in text.splitlines()  # the newline did not make a row
    rows = text.splitlines()[1:-1]
    for row in rows:
        assert len(row) < 2_000, row[:80]
    named = read_rows(text)
    for found in index.entries:
        if "</artifact_index>" not in found.value:  # (written so that it closes nothing)
            assert named.get(found.value) == found.where(), found.value
    assert counter.count_text(text) <= (400 if padded else 2_000)
    if grouped and padded:
        assert index.folded  # the leftover folded: its rows read back as the others
    if not padded:
        assert named.get("sed -n 1p src/a.py") == "line 6"
        assert "src/a (line 9); b.py" in text  # a value with a row's marks stays whole
        assert "x/x/x/" in text and " […]" in text  # cut to one short line
        assert "src/\udcff\udc80.py" in text


def test_a_path_is_found_whole_in_a_grouped_row_only_by_its_directory_and_name(
    tmp_path: Path,
) -> None:
    """What a plain substring search finds: the name and the directory, not the whole path
    (the bench measures both, `whole` and `read`)."""
    index = indexed(services(48), 500, PaddedCounter())
    text = index.render(EVENTS)
    folded = [f.value for f in index.entries if (f.kind, f.value) in index.folded]
    folded = [v for v in folded if v not in text]  # in a row (a group of one is whole)
    assert folded
    for value in folded:
        assert value.removeprefix(SERVICES) in text and f"  - {SERVICES}: " in text
