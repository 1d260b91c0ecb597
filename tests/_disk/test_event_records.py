"""Event records (`_disk/events.py`, on `_disk/records.py`): each kind declared once, read
back from what older and newer writers wrote.

`data/events-24678e9.jsonl` holds real lines written by the ctxoffload of commit 24678e9,
before records existed (`data/make_events_24678e9.py` says how it was made): today's
records must read them, render them and write them back byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._disk.commit import parse_log
from ctxoffload._disk.events import (
    EventKind,
    Truncation,
    event_sentence,
    record_of,
)
from ctxoffload._disk.records import KINDS, Event
from ctxoffload._disk.rows import dumps_line, dumps_record
from helpers import examples

OLD_LINES = Path(__file__).parent / "data" / "events-24678e9.jsonl"

# A value of each declared type, for a record with every field set.
SAMPLES: dict[str, Any] = {
    "int": 3,
    "str": "x",
    "float": 1.5,
    "bool": True,
    "Any": "x",
    "list[int]": [4, 9],
    "list[str]": ["a", "b"],
    "list[Any]": [{"artifact": "a"}],
    "list[list[int]]": [[1, 2], [5, 6]],
    "list[dict[str, Any]]": [{"name": "fetch", "id": "c1"}],
    "dict[str, Any]": {"session": "s0", "step": 2, "left": 1},
}


def sample(annotation: str) -> Any:
    return SAMPLES[annotation.split(" | ")[0]]


def full_record(cls: type[Event]) -> Event:
    declared = {
        name: kind
        for klass in cls.__mro__
        for name, kind in vars(klass).get("__annotations__", {}).items()
    }
    return cls(**{name: sample(declared[name]) for name in own_fields(cls)})


def own_fields(cls: type[Event]) -> tuple[str, ...]:
    return tuple(name for name in cls.fields_declared if name not in ("time", "writer"))


def test_every_kind_is_declared_once() -> None:
    names = {v for k, v in vars(EventKind).items() if k.isupper()}
    assert set(KINDS) == names
    assert all(KINDS[kind].kind == kind for kind in names)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_record_of_each_kind_round_trips(kind: str) -> None:
    record = full_record(KINDS[kind])
    line = dumps_line({"time": "2026-11-25T12:00:00Z", **record.to_json(), "writer": {}})
    back = record_of(json.loads(line))
    assert type(back) is KINDS[kind] and back.extra == {}
    assert dumps_line(back.to_json()) == line
    fields = own_fields(KINDS[kind])
    assert {name: back.field(name) for name in fields} == {n: record.field(n) for n in fields}
    assert back.sentence() and back.sentence() != kind


def test_a_writer_cannot_misspell_a_field() -> None:
    with pytest.raises(TypeError, match="Truncation has no field 'tokens_befor'"):
        Truncation(tool_id="c1", tokens_befor=10)


def test_a_field_given_as_none_is_written_and_one_left_out_is_not() -> None:
    record = Truncation(tool_id="c1", reference=None)
    assert record.to_json() == {"kind": "truncation", "tool_id": "c1", "reference": None}
    assert record.tokens_before is None


def old_lines() -> list[dict[str, Any]]:
    return parse_log(OLD_LINES.read_bytes(), str(OLD_LINES))


def test_the_lines_of_an_older_release_are_read_and_written_back_byte_for_byte() -> None:
    raw = OLD_LINES.read_bytes().splitlines(keepends=True)
    lines = old_lines()
    assert len(lines) == len(raw) and len({line["kind"] for line in lines}) >= 14
    for line, written in zip(lines, raw, strict=True):
        record = record_of(line)
        assert type(record) is KINDS[line["kind"]], line["kind"]
        assert record.extra == {}, (line["kind"], record.extra)  # every field it wrote is declared
        assert dumps_line(record.to_json()) == written


def test_the_lines_of_an_older_release_read_as_sentences() -> None:
    said = {line["kind"]: event_sentence(line) for line in old_lines()}
    assert said["truncation"].startswith("truncated fetch_log ")
    assert "→" in said["truncation"] and "tool_result-c" in said["truncation"]
    assert (
        said["compression"].startswith("compressed ")
        and "context.jsonl lines " in (said["compression"])
    )
    assert said["session_start"].startswith("session started: agent 'analyst', model scripted")
    assert said["pin"].startswith("pinned message ") and said["unpin"].startswith("unpinned")
    assert said["fork"].startswith("forked from session old at step 2: ")
    assert said["data"] == "stored a data file (image/png, 12 bytes): data/abc.png"
    assert all(sentence != kind and "None" not in sentence for kind, sentence in said.items())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("value", [None, "missing"], ids=["null", "missing"])
def test_a_field_a_line_lacks_reads_as_a_question_mark_never_none(kind: str, value: Any) -> None:
    # A line cut short, hand-edited or written by a buggy writer: each field it lacks (or
    # holds as null) is said as "?", never as Python's None.
    fields = {name: None for name in KINDS[kind].fields_declared if name not in ("time", "writer")}
    line = {"time": "2026-12-01T00:00:00Z", "kind": kind}
    if value is None:
        line |= fields
    sentence = event_sentence(line)
    assert "None" not in sentence, sentence


def test_a_newer_writers_kind_is_read_and_named() -> None:
    line = {"time": "2026-12-01T00:00:00Z", "kind": "handoff", "to": "b", "writer": {"pid": 1}}
    record = record_of(line)
    assert type(record) is Event and record.kind == "handoff"
    assert event_sentence(line) == "handoff"
    assert record.to_json() == line and list(record.to_json()) == list(line)


def test_a_newer_writers_extra_fields_are_kept_where_they_were() -> None:
    line = {
        "time": "2026-12-01T00:00:00Z",
        "kind": "truncation",
        "tool_id": "c1",
        "tool_name": "fetch",
        "shape": {"new": True},
        "tokens_before": 5000,
        "tokens_after": 300,
    }
    record = record_of(line)
    assert record.extra == {"shape": {"new": True}}
    assert list(record.to_json()) == list(line) and record.to_json() == line
    assert event_sentence(line) == (
        "truncated fetch 5,000→300 tokens; whole output in nowhere (no offloader)"
    )


def test_a_field_of_another_type_still_renders() -> None:
    line = {"kind": "pin", "window": "big", "pinned_tokens_after": [1], "message_id": 7}
    assert event_sentence(line).startswith("pinned message 7 (?, by ?): pins ?→[1] tokens")


def test_a_stored_result_of_an_unnamed_tool_reads_as_a_sentence() -> None:
    # A ToolResultBlock without a name stores tool_name "": the sentence said "result of  (c1)"
    # and "1 lines".
    line = {
        "kind": "tool_result",
        "reference": "/w/sessions/s/tool_result-c1.txt",
        "bytes": 1,
        "lines": 1,
        "tool_id": "c1",
        "tool_name": "",
    }
    assert event_sentence(line) == (
        "stored the whole result of a tool (c1): 1 line, 1 byte, in "
        "/w/sessions/s/tool_result-c1.txt"
    )


@pytest.mark.parametrize(
    "kind",
    [
        "context",
        "compression",
        "summary",
        "window",
        "clear_thinking",
        "compact",
        "background_summary",
        "provider_compaction",
        "host_compaction",
    ],
)
def test_an_event_whose_messages_are_on_lines_apart_names_exactly_those_lines(kind: str) -> None:
    # A batch repeated after a kill (some messages in the log already, another message
    # between them): the sentence said "lines 1-17", whose line 13 holds none of them.
    spans = {"lines": [1, 17], "spans": [[1, 12], [14, 17]]}
    line = {"kind": kind, "reference": "/w/sessions/s/context.jsonl", "messages": 16, **spans}
    assert "context.jsonl lines 1-12, 14-17" in event_sentence(line), event_sentence(line)
    together = {**line, "spans": None}
    assert "context.jsonl lines 1-17" in event_sentence(together), event_sentence(together)
    damaged = {**line, "spans": [[1, "x"]]}
    assert "context.jsonl lines 1-17" in event_sentence(damaged), event_sentence(damaged)


@pytest.mark.parametrize("kind", ["context", "compression"])
def test_an_event_of_one_line_names_it_as_one_line(kind: str) -> None:
    # The span a single message is on: once "lines 1-1", then "lines 1".
    line = {"kind": kind, "reference": "/w/sessions/s/context.jsonl", "messages": 1}
    sentence = event_sentence({**line, "lines": [7, 7]})
    assert "context.jsonl line 7" in sentence and "lines" not in sentence, sentence
    apart = event_sentence({**line, "lines": [7, 9], "spans": [[7, 7], [9, 9]]})
    assert "context.jsonl lines 7, 9" in apart, apart


_any_text = st.text(max_size=40)  # lone surrogates too: a tool may decode with surrogateescape
_event_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | _any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_any_text, inner, max_size=4),
    max_leaves=16,
)


def _read(line: bytes) -> Any:
    return json.loads(line, parse_constant=lambda name: f"<{name}>")


@pytest.mark.slow
@given(fields=st.dictionaries(_any_text, _event_values, max_size=6))
@settings(max_examples=examples(400), deadline=None)
def test_an_event_line_reads_back_as_the_line_json_writes(fields: dict[str, Any]) -> None:
    # The event writer's line (pydantic-core's serialiser, `json` for what it refuses) holds
    # the same values as `dumps_line`'s; without a float (whose exponent it pads less), the
    # same bytes.
    record = {"time": "2026-11-27T00:00:00.000+00:00", "kind": "x", **fields}
    fast, plain = dumps_record(record), dumps_line(record)
    assert fast.endswith(b"\n") and fast.count(b"\n") == 1
    assert _read(fast) == _read(plain)
    if "e-" not in plain.decode(errors="replace"):
        assert fast == plain


def test_an_event_field_json_refuses_is_refused_by_the_event_writer_too() -> None:
    with pytest.raises(TypeError):
        dumps_record({"kind": "x", "value": object()})


def test_an_estimated_truncation_says_what_was_counted_never_a_byte_range() -> None:
    """A tool output far over the limit is counted in its first lines and scaled: the line
    says that in words, not `(before: estimated, 20,560 to 2,088,890)`, a range whose second
    figure is the file's byte count (issue 83, item 5)."""
    line = {
        "kind": "truncation",
        "time": "2026-11-29T05:06:29Z",
        "tool_id": "c1",
        "tool_name": "fetch_logs",
        "tokens_before": 655_388,
        "tokens_after": 289,
        "tokens_before_exact": False,
        "tokens_before_range": [20_560, 2_088_890],
        "lines_shown": 19,
        "lines_total": 60_000,
    }
    said = event_sentence(line).split(";")[0]
    assert said == (
        "truncated fetch_logs ~655,388→289 tokens (estimated: its first lines counted, "
        "20,560 tokens, and scaled to its length), 19 of 60,000 lines shown"
    )
    exact = {key: value for key, value in line.items() if not key.startswith("tokens_before_")}
    assert event_sentence({**exact, "tokens_before": 6_095}).startswith(
        "truncated fetch_logs 6,095→289 tokens, "
    )
