"""The artifact index's groups: the paths of one directory and the commands of one program and
file share a row, under the line of context.jsonl that holds them, so that more entries fit
the same budget; what the model reads, what its Grep finds, and that no entry is lost."""

from __future__ import annotations

import re
from pathlib import Path

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


def indexed(msgs: list[Msg], budget: int, *, grouped: bool = True) -> ArtifactIndex:
    """The index of `msgs` leaving, message n on line n of context.jsonl."""
    found, calls = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    return ArtifactIndex.build(
        found,
        calls,
        summary_text="",
        kept=[],
        counter=COUNTER,
        budget=budget,
        events_file="/ws/sessions/s1/events.jsonl",
        grouped=grouped,
    )


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


def test_a_directorys_paths_and_a_files_reads_share_a_row_the_model_reads() -> None:
    msgs = [
        Msg(role="user", content="ls: src/app/a.py src/app/b.py src/app/c.py ORD-10001"),
        call("c1", "bash", command="sed -n '1,200p' utils/a.ts"),
        call("c2", "bash", command="sed -n '200,400p' utils/a.ts"),
        Msg(role="user", content="read src/lib/x.py"),
        Msg(role="user", content="read src/lib/y.py"),
    ]
    index = indexed(msgs, 2_000)
    text = index.render("/ws/sessions/s1/events.jsonl")
    rows = text.splitlines()
    # Under line 1, its one lone value and the directory's row.
    at = rows.index("- line 1: ORD-10001")
    assert rows[at + 1].startswith("  - src/app/: ")
    assert set(rows[at + 1].removeprefix("  - src/app/: ").split(" ")) == {"a.py", "b.py", "c.py"}
    # Entries of one group on several lines: each followed by its line.
    several = rows[rows.index("- on several lines:") + 1 :]
    assert "  - sed … utils/a.ts: -n '200,400p' (line 3); -n '1,200p' (line 2)" in several
    assert "  - src/lib/: y.py (line 5); x.py (line 4)" in several
    # The header says how to read a group, and what to do with a grouped path.
    assert "`dir/: a.py b.py` is dir/a.py and dir/b.py (Read or Grep the path so joined)" in text
    assert "`sed … f: -n 1p | -n 2p` is `sed -n 1p f` and `sed -n 2p f`" in text
    # Read as the header says, the rows name every entry at its own line.
    named = read_rows(text)
    for found in index.entries:
        assert named[found.value] == found.where(), found.value
    # A search of the context for a file's name or a command's file finds its row.
    for needle in ("b.py", "utils/a.ts", "'200,400p'", "y.py"):
        assert needle in text


def test_groups_name_more_within_the_same_budget() -> None:
    files = [
        f"{SERVICES}{verb}{noun}.ts"
        for verb in ("get", "update", "remove", "create")
        for noun in ("TeamMember", "TeamRole", "TeamInvite", "TeamCycle", "TeamMetric")
    ]
    msgs = [
        Msg(role="user", content="rg --files: " + " ".join(files[:12])),
        Msg(role="user", content="git status: " + " ".join(files[12:])),
    ]
    for budget in (150, 200, 300):
        flat, grouped = indexed(msgs, budget, grouped=False), indexed(msgs, budget)
        for index in (flat, grouped):
            assert COUNTER.count_text(index.render("/ws/sessions/s1/events.jsonl")) <= budget
        assert len(grouped.entries) > len(flat.entries), budget
        assert len(grouped.cut) < len(flat.cut), budget


async def test_the_agents_grep_finds_a_grouped_path_at_the_line_its_row_names(
    local_ws: LocalWorkspace,
) -> None:
    names = ["getTeamMember.ts", "updateTeamRole.ts", "removeTeamInvite.ts"]
    context: list[Msg] = [Msg(role="system", content="You are a coding agent.")]
    for i, name in enumerate(names):
        context += [
            call(f"c{i}", "read_file", path_hint=f"step {i}"),
            Msg(role="user", content=f"opened {SERVICES}{name} and {SERVICES}index{i}.ts {FILLER}"),
            Msg(role="assistant", content=f"noted. {FILLER}"),
        ]
    context += [Msg(role="user", content=f"now fix it {FILLER}")]
    comp = Compressor(
        ContextConfig(context_window=4000, artifact_index_tokens=800),
        model=ScriptedModel([], default=summary_reply("gist")),
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    result = await comp.maybe_compress(context, force=True)
    text = result.messages[1].text.partition("<artifact_index>")[2]
    assert f"  - {SERVICES}: " in text  # grouped: the directory once, each name after it
    assert f"{SERVICES}{names[0]}" not in text  # so no whole path to find by substring
    named = read_rows(text)
    grep = workspace_tools(local_ws)[1]
    for name in names:
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
)
def test_every_artifact_that_left_is_named_or_listed_and_the_budget_holds(
    messages: list[list[str]], budget: int
) -> None:
    msgs = []
    for i, values in enumerate(messages):
        commands = [v for v in values if v.split(" ")[0] in ("sed", "grep", "head", "cat")]
        others = " ".join(v for v in values if v not in commands)
        msgs += [call(f"c{i}-{j}", "bash", command=c) for j, c in enumerate(commands)]
        msgs.append(Msg(role="user", content=f"saw {others}" if others else "nothing"))
    found, _ = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    index = indexed(msgs, budget)
    placed = [*index.in_summary, *index.in_kept, *index.entries, *index.cut]
    # Each artifact that left is in exactly one place: named, or cut (listed in events.jsonl).
    assert sorted((f.kind, f.value) for f in placed) == sorted((f.kind, f.value) for f in found)
    assert {(e["kind"], e["value"]) for e in index.listing()} == {(f.kind, f.value) for f in found}
    text = index.render("/ws/sessions/s1/events.jsonl")
    assert COUNTER.count_text(text.removeprefix("<artifact_index>\n")) <= budget + 10
    named = read_rows(text)
    for entry in index.entries:
        assert named.get(entry.value) == entry.where(), entry.value
    for inside in index.in_summary:  # inside an entry: a piece the index holds unbroken
        assert inside.value in text, inside.value
    if index.cut:
        assert f"{len(index.cut)} more artifacts are listed in /ws/sessions/s1/events.jsonl" in text


@pytest.mark.parametrize("grouped", [True, False])
def test_hostile_values_cannot_break_the_index(grouped: bool) -> None:
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
    ]
    assert hostile[-1] is None  # a blank value is no artifact
    leaving = [f for f in hostile if f is not None]
    index = ArtifactIndex.build(
        leaving,
        {},  # type: ignore[arg-type]
        summary_text="",
        kept=[],
        counter=COUNTER,
        budget=2_000,
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
    assert named.get("sed -n 1p src/a.py") == "line 6"
    if grouped:
        assert "  - sed … src/a.py: -n 1p | -n 2p" in rows
        assert "src/a (line 9); b.py" in text  # a value with a row's marks stays whole
    assert "x/x/x/" in text and " […]" in text  # cut to one short line
    assert "src/\udcff\udc80.py" in text or "\udcff\udc80.py" in text


def test_a_path_is_found_whole_in_a_grouped_row_only_by_its_directory_and_name(
    tmp_path: Path,
) -> None:
    """What a plain substring search finds: the name and the directory, not the whole path
    (the bench measures both, `whole` and `read`)."""
    msgs = [Msg(role="user", content=f"ls {SERVICES}a.ts {SERVICES}b.ts")]
    text = indexed(msgs, 500).render(None)
    assert f"  - {SERVICES}: a.ts b.ts" in text
    assert "a.ts" in text and SERVICES in text and f"{SERVICES}b.ts" not in text
