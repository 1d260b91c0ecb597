"""`names_in`, the one reading of a file for what gc must keep: data/ names and the other
sessions it names, in every spelling a reference takes, across chunk boundaries."""

from __future__ import annotations

import json

import pytest

from ctxoffload.workspace._gc import names_in

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
