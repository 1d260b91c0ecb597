"""What gc reads and decides, as private units: `names_in` (data/ names and the other
sessions a file names, in every spelling a reference takes, across chunk boundaries) and
`sessions_to_remove` (never what is live)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.workspace._gc import (
    SessionUsage,
    footprint,
    names_in,
    removal_order,
    sessions_to_remove,
)
from helpers import examples

LONG = "s" + "x" * 127  # the longest session id
DATA = "a" * 64 + ".png"


@pytest.mark.parametrize(
    ("text", "sessions"),
    [
        ("/w/sessions/nightly-job/tool_result-c1.txt", {"nightly-job"}),
        ("s3://b/p/sessions/run.1/context.jsonl", {"run.1"}),
        ("memory://ws/sessions/run_1/state.json", {"run_1"}),
        ("C:\\\\w\\\\sessions\\\\win\\\\tool_result-c.txt", {"win"}),
        ('{"origin": {"session": "nightly-job", "step": 4}}', {"nightly-job"}),
        (json.dumps({"text": json.dumps({"parent": {"session": "lead"}})}), {"lead"}),
        (f'"session":"{LONG}"', {LONG}),
        ("sessions/.hidden/ and sessions/../ and sessions//", set()),
        ("sessions/no-slash-after", set()),
    ],
)
def test_the_sessions_a_file_names(text: str, sessions: set[str]) -> None:
    assert names_in([text.encode()])[1] == sessions


def test_a_name_cut_by_a_chunk_boundary_is_found() -> None:
    text = (f'x{"y" * 300} "session": "{LONG}" /w/sessions/{LONG}/f data/{DATA} ').encode()
    for cut in range(1, len(text)):
        data, sessions = names_in([text[:cut], text[cut:]])
        # (A data/ name cut in its extension is also read as a shorter name: that keeps
        # nothing more, as no file has it.)
        assert DATA in data and sessions == {LONG}, cut


@st.composite
def _workspaces(draw: st.DrawFn) -> list[SessionUsage]:
    names = [f"s{i}" for i in range(draw(st.integers(1, 8)))]
    return [
        SessionUsage(
            name,
            float(draw(st.integers(0, 10))),
            draw(st.integers(0, 100)),
            set(),
            sessions=set(draw(st.lists(st.sampled_from(names), max_size=3))),
            lease="agent 'x'" if draw(st.integers(0, 5)) == 0 else None,
        )
        for name in names
    ]


def _reaches(usages: list[SessionUsage], start: str, goal: str) -> bool:
    by_name = {u.name: u for u in usages}
    seen, todo = {start}, [start]
    while todo:
        for other in by_name[todo.pop()].sessions:
            if other == goal:
                return True
            if other in by_name and other not in seen:
                seen.add(other)
                todo.append(other)
    return False


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    _workspaces(),
    st.one_of(st.none(), st.integers(0, 10)),
    st.one_of(st.none(), st.integers(0, 400)),
)
def test_gc_never_plans_to_remove_what_is_live(
    usages: list[SessionUsage], older_than: int | None, max_bytes: int | None
) -> None:
    doomed, remaining, kept = sessions_to_remove(
        usages, {}, now=10.0, older_than=older_than, max_bytes=max_bytes
    )
    gone = {u.name for u in doomed}
    assert sorted(gone | {u.name for u in remaining}) == sorted(u.name for u in usages)
    assert not gone & {u.name for u in remaining}
    for usage in doomed:
        assert usage.lease is None
        assert not any(usage.name in u.sessions for u in remaining)
    # Removed one by one in order, a session goes only after every session naming it, but
    # those it names in turn (a ring, removed together).
    order = [u.name for u in removal_order(doomed)]
    for i, name in enumerate(order):
        for later in order[i + 1 :]:
            if name in next(u for u in doomed if u.name == later).sessions:
                assert _reaches(doomed, name, later)
    # What the limits would remove and is kept says why.
    for usage in remaining:
        idle = older_than is not None and usage.last_activity < 10.0 - older_than
        over = max_bytes is not None and footprint(remaining, {}) > max_bytes
        if idle or over:
            assert usage.name in kept, (usage, kept)
