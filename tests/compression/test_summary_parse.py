"""Reading a summary model's reply as models really write it: each reply in
`summary_replies/` (one file a reply, shaped as Claude, GPT, Gemini, Llama, Qwen, Mistral and
DeepSeek answer) parses to the fields its `.expected.json` names, the rest falling back; any
summary wrapped in prose or fences reads back whole; a reply cut off anywhere gives only
fields that arrived whole (or marked as cut); a hostile reply costs bounded time."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import Summary
from ctxoffload.compression._summary_parse import (
    CUT_NOTE,
    SummaryReply,
    parse_summary,
    read_summary,  # the private unit under test
)
from helpers import examples

FIELDS = tuple(Summary.model_fields)
REPLIES = Path(__file__).parent / "summary_replies"
REPLY_FILES = sorted(REPLIES.glob("*.txt"))
FILL = Summary(**{name: f"extract {name}" for name in FIELDS})


def test_the_reply_set_covers_every_family_and_holds_thirty_replies() -> None:
    assert len(REPLY_FILES) >= 30
    families = {path.name.split("-")[1] for path in REPLY_FILES}
    assert {"claude", "gpt", "gemini", "llama", "qwen"} <= families
    for path in REPLY_FILES:
        assert path.with_suffix(".expected.json").is_file(), path.name


@pytest.mark.parametrize("path", REPLY_FILES, ids=[p.stem for p in REPLY_FILES])
def test_each_real_reply_parses_to_its_expected_fields(path: Path) -> None:
    reply = path.read_bytes().decode("utf-8")  # bytes: CRLF and NUL stay as written
    expected = json.loads(path.with_suffix(".expected.json").read_text(encoding="utf-8"))
    if "error" in expected:
        with pytest.raises(ValueError):
            read_summary(reply)
        return
    found = read_summary(reply)
    assert found.fields == expected["fields"]
    assert found.shape == expected["shape"]
    assert list(found.missing) == expected["fallback"]
    assert list(found.cut) == expected["cut"]
    assert read_summary(reply) == found  # deterministic
    # What fell back comes from the extract; nothing that arrived is replaced.
    summary = found.summary(FILL)
    for name in FIELDS:
        want = expected["fields"].get(name, f"extract {name}")
        assert getattr(summary, name) == want


def test_a_reply_missing_a_field_needs_something_to_fill_it() -> None:
    reply = json.dumps({"task_overview": "the task"})
    with pytest.raises(ValueError, match="current_state"):
        parse_summary(reply)
    assert parse_summary(reply, FILL).current_state == "extract current_state"


@pytest.mark.parametrize(
    ("spelling", "field"),
    [
        ("## Task overview", "task_overview"),
        ("**Current state:**", "current_state"),
        ("# TASK_OVERVIEW", "task_overview"),
        ("3. Important Discoveries", "important_discoveries"),
        ("### 4) next-steps", "next_steps"),
        ("- **Context to preserve**:", "context_to_preserve"),
        ("__Next Steps__", "next_steps"),
        ("## Next steps (in order)", "next_steps"),
    ],
)
def test_a_heading_names_its_field_in_any_spelling(spelling: str, field: str) -> None:
    found = read_summary(f"{spelling}\nthe text under it\n")
    assert found.shape == "headings"
    assert found.fields == {field: "the text under it"}


@pytest.mark.parametrize(
    "key", ["task_overview", "Task overview", "TASK-OVERVIEW", "taskOverview", "Task Overview:"]
)
def test_a_key_names_its_field_in_any_spelling(key: str) -> None:
    assert read_summary(json.dumps({key: "the task"})).fields == {"task_overview": "the task"}


def test_prose_that_only_mentions_a_field_is_no_heading() -> None:
    with pytest.raises(ValueError):
        read_summary("Next steps are unclear.\nThe current state is fine.")


def test_an_object_wins_over_headings_and_a_field_it_lacks_comes_from_them() -> None:
    reply = (
        '{"task_overview": "from the object", "current_state": "from the object"}\n\n'
        "Next steps: from a label after it\nTask overview: not taken, the object has it"
    )
    found = read_summary(reply)
    assert found.fields == {
        "task_overview": "from the object",
        "current_state": "from the object",
        "next_steps": "from a label after it",
    }


def test_a_value_that_is_a_placeholder_is_no_field() -> None:
    found = read_summary(json.dumps({"task_overview": "real", "current_state": "..."}))
    assert found.fields == {"task_overview": "real"}


def test_numbers_keep_the_digits_the_model_wrote() -> None:
    reply = '{"task_overview": 1e400, "current_state": ' + "9" * 5000 + "}"
    found = read_summary(reply)
    assert found.fields == {"task_overview": "1e400", "current_state": "9" * 5000}


# -- properties ------------------------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
).map(str.strip)


def _meaningful(value: str) -> bool:
    """Text a field keeps as it is: not empty, not a schema placeholder."""
    try:
        return read_summary(json.dumps({"task_overview": value})).fields == {"task_overview": value}
    except ValueError:
        return False


_FIELD = _TEXT.filter(_meaningful)
_SUMMARIES = st.builds(Summary, **dict.fromkeys(FIELDS, _FIELD))
_PROSE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="{<\x00"),
    max_size=80,
)
_FENCES = st.sampled_from(
    [("", ""), ("```json\n", "\n```"), ("```\n", "\n```"), ("```JSON", "```")]
)


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(
    summary=_SUMMARIES,
    before=_PROSE,
    after=_PROSE,
    fence=_FENCES,
    indent=st.sampled_from([None, 1, 2]),
    ascii_only=st.booleans(),
)
def test_any_summary_wrapped_in_prose_or_a_fence_reads_back_whole(
    summary: Summary,
    before: str,
    after: str,
    fence: tuple[str, str],
    indent: int | None,
    ascii_only: bool,
) -> None:
    body = json.dumps(summary.model_dump(), indent=indent, ensure_ascii=ascii_only)
    reply = f"{before}\n{fence[0]}{body}{fence[1]}\n{after}"
    found = read_summary(reply)
    assert found.summary() == summary
    assert not found.missing and not found.cut


def _only_whole_fields(found: SummaryReply, original: dict[str, Any]) -> None:
    """Every field `found` holds is the original's, whole, or its start marked as cut."""
    assert len(found.cut) <= 1
    for name, value in found.fields.items():
        if name in found.cut:
            assert value.endswith(CUT_NOTE)
            assert original[name].startswith(value[: -len(CUT_NOTE)])
        else:
            assert value == original[name]


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(
    summary=_SUMMARIES,
    at=st.floats(min_value=0, max_value=1),
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
)
def test_a_reply_cut_anywhere_gives_only_fields_that_arrived(
    summary: Summary, at: float, indent: int | None, ascii_only: bool
) -> None:
    original = summary.model_dump()
    body = json.dumps(original, indent=indent, ensure_ascii=ascii_only)
    cut = body[: int(len(body) * at)]
    try:
        found = read_summary(cut)
    except ValueError:
        return
    _only_whole_fields(found, original)


def test_every_cut_of_one_reply_gives_only_fields_that_arrived() -> None:
    original = {name: f'the {name} says "quoted" \\ é 😀 end' for name in FIELDS}
    for ascii_only in (True, False):
        body = json.dumps(original, ensure_ascii=ascii_only)
        for end in range(len(body) + 1):
            try:
                found = read_summary(body[:end])
            except ValueError:
                continue
            _only_whole_fields(found, original)
            if end == len(body):
                assert found.fields == original and found.shape == "json"


# -- hostile replies -------------------------------------------------------------------------

_HOSTILE = {
    "ten megabytes of text": "x" * 10_000_000,
    "100,000 nested brackets": "[" * 100_000 + "{" * 100_000,
    "100,000 nested objects": '{"a":' * 100_000,
    "a megabyte of backslashes in a string": '{"task_overview": "' + "\\" * 1_000_000,
    "a megabyte of backslashes": "\\" * 1_000_000,
    "unclosed quotes everywhere": "{'a':\"x\"q" * 100_000,
    "a million headings": "## Next steps\n" * 1_000_000,
    "a million tags": "<task_overview>" * 1_000_000,
    "a megabyte of escapes JSON has not": '{"task_overview": "' + "\\'" * 500_000 + '"}',
    "100,000 objects": '{"next_steps": "x"}' * 100_000,
    "blank lines after a heading": "## Next steps\nrun it" + "\n" * 1_000_000 + "x",
    "spaces after a rule": "## Next steps\nrun\n---" + " \n" * 500_000 + "x",
    "long runs of spaces after a name": ("task" + " " * 1990 + "x\n") * 5_000,
    "a long value of punctuation": '{"task_overview": "' + "!" * 1_000_000 + 'a"}',
    "thinking never closed": "<think>" * 1_000_000,
    "spaces in a tag": "<task" + " " * 1_000_000,
    "a wide list 900 objects deep": '{"next_steps": '
    + '{"a": ' * 900
    + "["
    + "1," * 1_000_000
    + "1]"
    + "}" * 901,
}


@pytest.mark.parametrize("reply", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_a_hostile_reply_costs_bounded_time(reply: str) -> None:
    started = time.monotonic()
    with contextlib.suppress(ValueError):
        read_summary(reply)
    # Linear work: seconds on an idle machine, under a minute on a busy shared one; work
    # that grows with the square of the size would take hours.
    assert time.monotonic() - started < 60


def test_a_ten_megabyte_object_keeps_every_field() -> None:
    original = {name: f"{name} " + "y" * 2_000_000 for name in FIELDS}
    found = read_summary("Here it is:\n" + json.dumps(original) + "\nDone.")
    assert found.fields == original


def test_nul_characters_and_lone_surrogates_never_reach_a_field() -> None:
    reply = (
        '{"task_overview": "a\\u0000b\x00c", "current_state": "half \\ud83d pair", '
        '"next_steps": "raw \udcff byte"}'
    )
    found = read_summary(reply)
    assert found.fields["task_overview"] == "abc"
    assert found.fields["current_state"] == "half \ufffd pair"
    assert found.fields["next_steps"] == "raw \ufffd byte"
    for value in found.fields.values():
        value.encode("utf-8")  # writable to any record


def test_a_reply_that_stops_inside_its_thinking_has_no_summary() -> None:
    with pytest.raises(ValueError):
        read_summary('<think>\nThe summary should be {"task_overview": "draft"')
