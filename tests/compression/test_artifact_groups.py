"""The artifact index's layout: every entry that fits whole written whole (filled to the
budget counted exactly), and entries folded into the tree of their directories or the row of
their command's program and file where that names more, never fewer as plain substrings;
what the model reads, what its Grep finds, and that no entry is lost."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import FoundArtifact, find_artifacts
from ctxoffload.readback import workspace_tools
from helpers import call, delimiters_in, examples, summary_reply

COUNTER = get_token_counter(exact=True)
FILLER = " ".join(f"word{j}" for j in range(80))
SERVICES = "apps/x/src/domain/teams/services/"
EVENTS = "/ws/sessions/s1/events.jsonl"
WORD = "consider-using"
TREE_RULE = (
    "A folder's row lists its files: `- src/ (line 4): a.py b/c.py` means src/a.py, src/b/c.py "
    "and their folders (no leading ./); an indented row adds to the path of the row it is "
    "under."
)


class PaddedCounter:
    """The exact counter, with 6 tokens more on every text counted: a counter whose pieces sum
    far over its whole count (as a counter that adds a message's framing to each text does)."""

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


def listing() -> list[Msg]:
    """An `ls -R` of a repository (shallow files and deep ones, 110 entries), then a read of
    one file: the kind of listing a compaction drops whole."""
    paths = [f"./src/m{n}.py" for n in range(40)]
    paths += [f"./doc/data/messages/{c}/{WORD}-{c}{n}/bad.py" for c in "abcd" for n in range(15)]
    paths += [f"./tests/regrtest_data/pkg{n}/sub/module{n}.py" for n in range(10)]
    return [
        call("c1", "bash", command="ls -R"),
        Msg(role="user", content="\n".join(paths)),
        call("c2", "bash", command="cat pylint/lint/pylinter.py"),
        Msg(role="user", content=f"class PyLinter: ... {FILLER}"),
    ]


# What the header tells the model, read the way it says: this reader is the test's own.
_LINE_ROW = re.compile(r"^- (line \d+|no line):(.*)$")
_GROUP_ROW = re.compile(r"^  - (.+?): (.*)$")
_MARK = re.compile(r" \((line \d+|no line)\)$")
_TREE_ROW = re.compile(r"^((?:  )*)- (\S*/)(?: \((lines? [\d, -]+|no line)\))?:(?: (.*))?$")


def read_rows(text: str) -> dict[str, str]:
    """Each value the index names, with the line (or lines) it names for it."""
    named: dict[str, str] = {}
    section = None
    heads: list[tuple[str, str | None]] = []  # each tree row's path and mark, by depth
    tree: dict[str, str] = {}  # what the tree names, its leading `./` left off
    for row in text.splitlines():
        if found := _TREE_ROW.match(row):
            indent, head, mark, items = found.groups()
            depth = len(indent) // 2
            above, above_mark = heads[depth - 1] if depth else ("", None)
            mark = mark or above_mark  # a row with no mark is on the lines of the one above
            heads[depth:] = [(above + head, mark)]
            if mark is not None:  # a head names its directory, at its row's lines
                tree.setdefault((above + head).removesuffix("/"), mark)
            for item in filter(None, (items or "").split(" ")):
                assert mark is not None, row  # a row with items says their lines
                parts = (above + head + item).split("/")
                tree[above + head + item] = mark
                for end in range(1, len(parts)):  # and the folders on its way
                    tree.setdefault("/".join(parts[:end]), mark)
        elif found := _LINE_ROW.match(row):
            # One-word values a blank apart, then ` | ` before each value holding a blank.
            section = found.group(1)
            words, *spaced = found.group(2).split(" | ")
            for value in [*filter(None, words.split(" ")), *spaced]:
                named[value] = section
        elif row == "- on several lines:":
            section = None
        elif found := _GROUP_ROW.match(row):
            head, body = found.groups()
            assert " … " in head, row
            for part in body.split("; "):
                mark = _MARK.search(part)
                where = mark.group(1) if mark else section
                assert where is not None, row
                program, _, last = head.partition(" … ")
                for middle in _MARK.sub("", part).split(" | "):
                    named[f"{program} {middle} {last}"] = where
    for value, mark in tree.items():
        named.setdefault(value, mark)
        named.setdefault("./" + value, mark)
    return named


def on_line(mark: str | None, where: str) -> bool:
    """Whether the mark a row says (`line 4`, `lines 4, 9`, `lines 4-40`) holds `where`."""
    if mark is None or mark == where:
        return mark is not None
    if not mark.startswith("lines ") or not where.startswith("line "):
        return False
    line = int(where.removeprefix("line "))
    spec = mark.removeprefix("lines ")
    if "-" in spec:
        low, high = map(int, spec.split("-"))
        return low <= line <= high
    return line in {int(n) for n in spec.split(", ")}


def strict(index: ArtifactIndex, found: list[FoundArtifact]) -> int:
    """How many of `found` the index names as plain substrings."""
    text = index.render(EVENTS)
    return sum(f.value in text for f in found)


def test_folding_names_at_least_as_many_as_the_fill_and_folds_nothing_it_need_not() -> None:
    """The fill of whole entries (and the layout before it) is what folding starts from: the
    index names at least as many in all; when every entry fits whole, none is folded; what is
    not folded is written whole."""
    for msgs in (listing(), [*services(48), call("c1", "bash", command="sed -n 1p u/a.ts")]):
        found, _ = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
        for counter in (COUNTER, PaddedCounter()):
            for budget in (120, 200, 350, 600, 900, 2_500):
                before = indexed(msgs, budget, counter, grouped=False, fill=False)
                filled = indexed(msgs, budget, counter, grouped=False)
                now = indexed(msgs, budget, counter)
                text = now.render(EVENTS)
                assert counter.count_text(text) <= budget
                assert len(now.cut) <= len(filled.cut) <= len(before.cut), budget
                assert all(
                    f.value in text for f in now.entries if (f.kind, f.value) not in now.folded
                )
                if not filled.cut:
                    assert not now.folded and strict(now, found) == len(found), budget


def test_the_budget_is_filled_counted_exactly() -> None:
    """No entry the fill of whole entries leaves out would fit whole: the estimate (a few
    hundredths over on the corpus) no longer leaves the end of the budget unused. The fill
    names at least what the estimate alone does (an entry inside another one's text, the
    path a command reads, is named by it rather than written again)."""
    msgs = [*services(48), call("c1", "bash", command="sed -n '1,200p' utils/a.ts")]
    more = 0
    for budget in (120, 200, 350, 600):
        before = indexed(msgs, budget, grouped=False, fill=False)
        now = indexed(msgs, budget, grouped=False)
        named_before = len(before.entries) + len(before.in_summary)
        named_now = len(now.entries) + len(now.in_summary)
        assert named_now >= named_before, budget
        more += named_now - named_before
        for found in now.cut:
            wider = now.render_with(
                [*now.entries, found], len(now.cut) - 1, EVENTS, calls=now.show_calls
            )
            assert COUNTER.count_text(wider) > budget, (budget, found.value)
    assert more > 0


_VALUES = (
    st.text(
        alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])  # o200k, cl100k
@settings(max_examples=examples(150), deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.sampled_from(["path", "command", "id"]), _VALUES, st.integers(1, 4)),
        min_size=1,
        max_size=12,
        unique_by=lambda entry: entry[1],
    )
)
def test_the_estimate_of_whole_rows_is_within_two_tokens_a_row_of_their_count(
    model: str, entries: list[tuple[str, str, int]]
) -> None:
    """What the index adds up as it takes entries (`IndexRows`: each value counted with the
    blank or ` | ` before it, each row's head with its line break) is the rows' count for an
    encoding that cuts its pieces at those blanks (o200k, cl100k), but at a row's end, where
    a run of signs takes the line break into its last piece: BPE counts that piece up to two
    tokens fewer than the run and the break apart, or, for a few runs (`@;]/`), one more. So
    the estimate is within two tokens a row of the rows counted whole, either way (it was a
    token over for each value, a fifth over the corpus's rows)."""
    from ctxoffload.compression._index._layout import IndexRows, render_rows

    counter = get_token_counter(model, exact=True)
    found = [FoundArtifact(kind, value, line) for kind, value, line in entries]
    rows = IndexRows(counter.count_text)
    for entry in found:
        rows.add(entry)
    text = "".join(row + "\n" for row in render_rows(found, set())[0])
    exact = counter.count_text(text)
    lines = text.count("\n")
    assert -lines <= rows.tokens - exact <= 2 * lines, text


def test_a_listing_folds_into_the_tree_the_model_reads() -> None:
    msgs = listing()
    found, _ = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    filled = indexed(msgs, 700, grouped=False)
    index = indexed(msgs, 700)
    text = index.render(EVENTS)
    assert index.folded, text
    named_now, named_filled = len(found) - len(index.cut), len(found) - len(filled.cut)
    assert named_now >= named_filled + 15, text
    assert named_now >= 0.8 * len(found), text
    # The header says how to read the tree, once; a directory is written once, as a row's
    # head, and the rows under it go on from it.
    assert text.count(TREE_RULE) == 1
    rows = text.splitlines()
    # A head alone (no item of its own) on the lines of the rows under it, which then leave
    # them to it.
    assert "- doc/data/messages/ (line 2):" in rows, text
    assert "  - a/: consider-using-a0/bad.py" in text, text
    assert any(r.startswith("  - ") and r.split(" ")[3].rstrip(":").endswith("/") for r in rows)
    # Read as the header says, the rows name every entry, at a line their mark holds.
    named = read_rows(text)
    for entry in index.entries:
        assert on_line(named.get(entry.value), entry.where()), entry.value
    assert COUNTER.count_text(text) <= 700


def test_the_tree_writes_each_directory_once_and_keeps_each_paths_end() -> None:
    """The tree's rows for a few paths (`_path_tree`, which the index renders with)."""
    from ctxoffload.compression._index._path_tree import tree_rows

    paths = [
        *((f"pylint/checkers/base/{c}_checker.py", "line 4") for c in "abcde"),
        ("pylint/checkers/base/f_checker.py", "line 9"),
        ("pylint/checkers/refactoring/refactoring_checker.py", "line 4"),
        ("pylint/checkers/design_analysis.py", "line 4"),
        ("pylint/checkers/typecheck.py", "line 4"),
        ("/srv/data/lone.csv", "line 7"),
    ]
    rows, whole = tree_rows(paths)
    assert rows == [
        "- pylint/checkers/ (line 4): design_analysis.py typecheck.py"
        " refactoring/refactoring_checker.py",
        "  - base/ (lines 4, 9): " + " ".join(f"{c}_checker.py" for c in "abcdef"),
    ]
    assert whole == [("/srv/data/lone.csv", "line 7")]  # a row of one would cost more
    named = read_rows("\n".join(rows))
    assert all(on_line(named.get(v), w) for v, w in paths[:-1])
    # Each item keeps its path's end whole: its name, and its last two parts where the
    # directory above has no row of its own.
    assert "refactoring/refactoring_checker.py" in rows[0]
    assert "a_checker.py" in rows[1]
    many = [(f"src/m{n}/x{n}.py", f"line {n}") for n in range(1, 9)]
    assert tree_rows(many)[0] == [
        "- src/ (lines 1-8): " + " ".join(f"m{n}/x{n}.py" for n in range(1, 9))
    ]


def test_a_files_reads_fold_into_one_row_under_their_line() -> None:
    """The command form of a group's row (`_index_layout`, which the index renders with):
    folded reads of one file share a row under their line, or under `on several lines` with
    each item's line; an entry not folded stays whole on its line's row."""
    from ctxoffload.compression._index._layout import render_rows

    reads = [
        FoundArtifact("command", f"sed -n '{a},{a + 39}p' utils/a.ts", line)
        for a, line in ((1, 4), (41, 4), (81, 4), (121, 9))
    ]
    lone = FoundArtifact("command", "sed -n '1,9p' utils/b.ts", 4)
    folded = {(f.kind, f.value) for f in reads[:3]}
    rows, rules = render_rows([lone, *reads[:3]], folded)
    assert rows == [
        "- line 4: | sed -n '1,9p' utils/b.ts",
        "  - sed … utils/a.ts: -n '1,40p' | -n '41,80p' | -n '81,120p'",
    ]
    assert rules == [
        "A command's row lists variants: `sed … f: -n 1p | -n 2p` means `sed -n 1p f` and "
        "`sed -n 2p f`."
    ]
    rows, _ = render_rows(reads, folded | {(reads[3].kind, reads[3].value)})
    assert rows == [
        "- on several lines:",
        "  - sed … utils/a.ts: -n '1,40p' | -n '41,80p' | -n '81,120p' (line 4);"
        " -n '121,160p' (line 9)",
    ]
    named = read_rows("\n".join(rows))
    assert all(named[f.value] == f.where() for f in reads)


async def test_the_agents_grep_finds_a_path_in_the_tree_by_its_name_and_its_last_two_parts(
    local_ws: LocalWorkspace,
) -> None:
    """A real compaction into a real workspace: the agent's Grep over the session's
    context.jsonl finds a path the tree folded by its file name and by its last two parts,
    at a line its row's mark names, and the whole path (the heads above it joined) there."""
    context: list[Msg] = [Msg(role="system", content="You are a coding agent.")]
    for i, m in enumerate(listing()):
        context.append(m)
        if m.role == "user":
            context.append(Msg(role="assistant", content=f"noted {i}. {FILLER}"))
    context += [Msg(role="user", content=f"now fix it {FILLER}")]
    comp = Compressor(
        ContextConfig(context_window=4000, artifact_index_tokens=700),
        model=ScriptedModel([], default=summary_reply("gist")),
        offloader=local_ws,
        session_id="s1",
    )
    result = await comp.maybe_compress(context, force=True)
    text = result.messages[1].text.partition("<artifact_index>")[2]
    named = read_rows(text)
    folded = [v for v in named if v not in text and v.count("/") >= 3]
    assert len(folded) >= 20, text
    grep = workspace_tools(local_ws)[1]
    for value in folded[:: max(1, len(folded) // 12)]:
        # The model takes the path's end from its row (the file name, or the last two parts)
        # and the whole path from the heads above it, as the header says; each grep of the
        # session's context.jsonl lands on a line the row's mark holds.
        assert value.rsplit("/", 1)[1] in text
        for needle in (value, "/".join(value.split("/")[-2:]), value.rsplit("/", 1)[1]):
            out = await grep(re.escape(needle), "sessions/s1/context.jsonl")
            hits = re.findall(r"context\.jsonl:(\d+):", out)
            assert any(on_line(named[value], f"line {n}") for n in hits), (needle, out)


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


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
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
    filled = indexed(msgs, budget, counter, grouped=False)
    placed = [*index.in_summary, *index.in_kept, *index.entries, *index.cut]
    # Each artifact that left is in exactly one place: named, or cut (listed in events.jsonl).
    assert sorted((f.kind, f.value) for f in placed) == sorted((f.kind, f.value) for f in found)
    assert {(e["kind"], e["value"]) for e in index.listing()} == {(f.kind, f.value) for f in found}
    text = index.render(EVENTS)
    assert counter.count_text(text) <= budget
    # No fewer named than the fill of whole entries names; what is not folded is whole.
    assert len(index.cut) <= len(filled.cut)
    assert all(f.value in text for f in index.entries if (f.kind, f.value) not in index.folded)
    named = read_rows(text)
    for entry in index.entries:
        assert on_line(named.get(entry.value), entry.where()), entry.value
    for inside in index.in_summary:  # inside an entry: a piece the index holds unbroken
        assert inside.value in text, inside.value
    if index.cut:
        assert f"{len(index.cut)} more artifacts are listed in /ws/sessions/s1/events.jsonl" in text


_PART = st.one_of(
    st.sampled_from(["src", "lib", "apps", "a b", "{x,y}", "c:d", "é", "日本", "..", ".", ""]),
    st.text(alphabet="ab/ {}:(é-_.", min_size=1, max_size=6),
)
_HOSTILE_PATHS = st.one_of(
    st.lists(_PART, min_size=2, max_size=6).map("/".join),
    st.builds(lambda n: "deep/" * n + "end.py", st.integers(1, 120)),
)


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(["path", "path", "path", "command", "id"]),
            _HOSTILE_PATHS,
            st.one_of(st.none(), st.integers(1, 60)),
            st.integers(1, 3),
        ),
        min_size=1,
        max_size=120,
    ),
    budget=st.integers(60, 1_500),
    padded=st.booleans(),
)
def test_any_artifacts_fit_the_budget_counted_exactly_and_each_is_read_back(
    entries: list[tuple[str, str, int | None, int]], budget: int, padded: bool
) -> None:
    """Random artifacts over many directories, with blanks, braces, colons, `(`, non-ASCII
    names, empty and `..` parts and very long single paths: the index never takes more than
    its budget counted exactly, each artifact is in one place, and each entry is found whole
    or read back, by the header's rule, at a line its row names."""
    leaving: list[FoundArtifact] = []
    for kind, value, line, mentions in entries:
        found = FoundArtifact.from_json(
            {"kind": kind, "value": value, "line": line, "mentions": mentions}
        )
        if found is not None and all(
            (found.kind, found.value) != (f.kind, f.value) for f in leaving
        ):
            leaving.append(found)
    counter = PaddedCounter() if padded else COUNTER
    index = ArtifactIndex.build(
        leaving, {}, summary_text="", kept=[], counter=counter, budget=budget, events_file=EVENTS
    )  # type: ignore[arg-type]
    text = index.render(EVENTS)
    assert counter.count_text(text) <= budget
    placed = [*index.in_summary, *index.entries, *index.cut]
    assert sorted((f.kind, f.value) for f in placed) == sorted((f.kind, f.value) for f in leaving)
    named = read_rows(text)
    for entry in index.entries:
        assert entry.value in text or on_line(named.get(entry.value), entry.where()), entry
    for inside in index.in_summary:
        assert inside.value in text, inside.value


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
            assert on_line(named.get(found.value), found.where()), found.value
    assert counter.count_text(text) <= (400 if padded else 2_000)
    if not padded:
        assert named.get("sed -n 1p src/a.py") == "line 6"
        assert "src/a (line 9); b.py" in text  # a value with a row's marks stays whole
        assert "x/x/x/" in text and " […]" in text  # cut to one short line
        assert "src/\udcff\udc80.py" in text


def test_a_path_in_the_tree_is_found_whole_only_by_its_row_and_the_heads_above(
    tmp_path: Path,
) -> None:
    """What a plain substring search finds of a folded path: its end (the name, and more of
    its path where no row above holds it), not the whole path (the bench measures both,
    `whole` and `read`)."""
    index = indexed(listing(), 700)
    text = index.render(EVENTS)
    folded = [f.value for f in index.entries if (f.kind, f.value) in index.folded]
    folded = [v for v in folded if v not in text]  # in a row (a path no row pays for is whole)
    assert folded
    for value in folded:
        assert value.rsplit("/", 1)[1] in text


def test_a_lines_row_writes_one_word_values_a_blank_apart_and_the_others_after_a_bar() -> None:
    """`- line 4: a b | c d`: the values that are one word (no blank, no `|`) a blank apart,
    then ` | ` before each other one; read back by splitting at ` | ` first. Values made to
    confuse it (a lone `|`, a word ending in `|`, a tab, `a | b`) are each read back whole."""
    from ctxoffload.compression._index._layout import render_rows

    values = ["ORD-1", "|", "x|", "a\tb", "grep x | head", "pytest -q", "src/a.py", "/srv/b c"]
    entries = [FoundArtifact("id", value, 4) for value in values]
    rows, rules = render_rows(entries, set())
    assert rows == [
        "- line 4: ORD-1 src/a.py | | | x| | a\tb | grep x | head | pytest -q | /srv/b c"
    ]
    assert rules == []
    named = read_rows("\n".join(rows))
    # Every value but the one holding ` | ` itself is read back exactly (that one is still a
    # plain substring of the row, which is how the bench's `whole` finds it).
    assert {v for v in values if " | " not in v} <= set(named)
    assert set(named) - set(values) <= {"grep x", "head"}
    assert all(value in rows[0] for value in values)


def test_a_directory_is_named_by_the_paths_that_go_through_it() -> None:
    """`./doc/data` and `./doc/data/a/x.md`, from an `ls -R`: a directory costs nothing where
    a path written in the tree or whole goes through it (the rule says a row names the folders
    on its paths' way, and a leading `./` is left off); `./doc/x` and `doc/x` are one path."""
    from ctxoffload.compression._index._path_tree import tree_rows

    paths = [("./doc/data", "line 3"), ("./doc/data/messages", "line 5")]
    paths += [(f"./doc/data/messages/{name}-name/bad.py", "line 3") for name in "pqrstu"]
    paths += [("./doc/data/b", "line 3"), ("./doc/data/b/lone.md", "line 3")]
    rows, whole = tree_rows(paths)
    items = " ".join(f"{name}-name/bad.py" for name in "pqrstu")
    assert rows == [f"- doc/data/messages/ (lines 3, 5): {items}"]
    # A row for `doc/data/` would cost more than `./doc/data/b/lone.md` written whole, which
    # names `./doc/data/b` and `./doc/data` as plain substrings.
    assert whole == [("./doc/data/b/lone.md", "line 3")]
    named = read_rows("\n".join(rows))
    for value, where in paths:
        assert on_line(named.get(value), where) or any(value in w for w, _ in whole), value
    # Two spellings of one directory share its row; a directory with nothing under it that
    # the index names is an item of its own.
    spelled = [("doc/a/x.md", "line 1"), ("./doc/a/y.md", "line 2"), ("./doc/a/empty", "line 2")]
    rows, whole = tree_rows(spelled)
    assert len(rows) == 1 and whole == [] and "./" not in rows[0], rows
    assert rows[0].endswith(("/empty", " empty")), rows
    named = read_rows(rows[0])
    assert all(on_line(named.get(value), where) for value, where in spelled), rows
    # One file spelled both ways is one item, on both its lines.
    twice = [(f"./src/pkg/m{n}.py", "line 1") for n in range(6)] + [("src/pkg/m0.py", "line 2")]
    rows, whole = tree_rows(twice)
    assert rows == ["- src/pkg/ (lines 1, 2): " + " ".join(f"m{n}.py" for n in range(6))]
    assert whole == []


_PART = st.sampled_from(["src", "a", "b", "lib", "x.py", "y.md", ".", "..", "pkg", "t"])


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "./", "/"]),
            st.lists(_PART, min_size=2, max_size=5),
            st.integers(min_value=1, max_value=6),
        ),
        max_size=40,
    )
)
def test_the_paths_under_each_first_folder_make_rows_of_their_own(
    drawn: list[tuple[str, list[str], int]],
) -> None:
    """What `Layouts.tree` relies on to work out each first folder's tree once: the tree of
    every path is the trees of the paths under each first folder, taken alone, one after the
    other in the order of its first path (a directory named itself, `./`, `..` and paths
    written whole included)."""
    from ctxoffload.compression._index._layout import Layouts
    from ctxoffload.compression._index._path_tree import in_tree, placed, tree_rows

    paths = [(lead + "/".join(parts), f"line {n}") for lead, parts, n in drawn]
    paths = [(value, where) for value, where in paths if in_tree(value)]
    parts = [placed(value).split("/") for value, _ in paths]
    by_first: dict[str, list[tuple[str, str]]] = {}
    for path, split in zip(paths, parts, strict=True):
        by_first.setdefault(split[0], []).append(path)
    rows: list[str] = []
    whole: list[tuple[str, str]] = []
    for under in by_first.values():
        under_rows, under_whole = tree_rows(under)
        rows += under_rows
        whole += under_whole
    assert tree_rows(paths) == (rows, whole)
    layouts = Layouts()
    assert layouts.tree(paths, parts) == (rows, whole)
    # Again after a render of fewer paths, as a search renders: the same rows.
    layouts = Layouts()
    layouts.tree(paths[: len(paths) // 2], parts[: len(parts) // 2])
    assert layouts.tree(paths, parts) == (rows, whole)
