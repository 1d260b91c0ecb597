"""The Projector reads its decisions back from the session's record, and trusts none of it:
an event line of another shape (a newer release's, a damaged one) is skipped, as `show`
skips it, and the history is sent; what a host passes that is no message is refused naming
its index, never with an AttributeError or a RecursionError."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxoffload import ContextConfig, InvalidContent, LocalWorkspace, Msg
from ctxoffload.compression import Projector, is_summary_message
from helpers import examples, plausible_session

CONFIG = ContextConfig(context_window=3000, tool_result_limit=200)

HISTORY = [
    {"id": "m1", "role": "user", "content": "where does the build fail?"},
    {"id": "m2", "role": "assistant", "content": "in step 3"},
]
KEYS = ["id:m1", "id:m2"]


def _write_lines(workspace: LocalWorkspace, session: str, lines: list[bytes]) -> None:
    """Lines appended to the session's events.jsonl as a hand, another release or a torn
    write leaves them."""
    path = workspace.events_path(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as file:
        file.write(b"".join(line + b"\n" for line in lines))


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


# Any JSON value, the message-like ones and keys of this history among them, and values nested
# up to past what the reader reads (216 levels).
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from([*KEYS, "m1", "m2", "system", "user", "assistant", "tool", "", "projection"]),
)
_json = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "nope", 5])},
    optional={"content": _json, "id": _json, "metadata": _json},
)
_value = st.one_of(
    _json,
    _message_like,
    st.lists(_message_like, max_size=3),
    st.integers(min_value=100, max_value=240).map(_nested),
)
_cut = st.fixed_dictionaries(
    {},
    optional={"key": st.sampled_from([*KEYS, "id:m3"]) | _json, "given": _json, "message": _value},
)
_event = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(
            ["projection", "projection_cut", "provider_compaction", "model_call", "message"]
        )
    },
    optional={
        "cuts": st.one_of(_value, st.lists(_cut, max_size=3)),
        "start": _value,
        "covers": _value,
        "last_key": _value,
        "messages": _value,
        "note": _value,
        "item_key": _value,
        "step": _value,
        "message": _value,
    },
)
_line = st.one_of(
    _event.map(lambda e: json.dumps(e).encode()),
    _json.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
    st.integers(min_value=1, max_value=30).map(lambda n: b'{"kind": "projection", ' * n),
)


@pytest.mark.slow
@settings(
    max_examples=examples(150),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(lines=st.lists(_line, min_size=1, max_size=4))
def test_no_event_line_of_any_shape_makes_a_projection_raise(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = LocalWorkspace(Path(folder))
        _write_lines(workspace, "s", lines)
        sent = asyncio.run(Projector(workspace, "s", config=CONFIG).project(HISTORY))
        assert sent and all(isinstance(m, Msg) for m in sent)
        assert sent[-1].text == "in step 3"  # the newest message is always sent


@pytest.mark.parametrize(
    "line",
    [
        {"kind": "projection", "start": "x", "covers": 1, "last_key": "id:m1", "messages": []},
        {"kind": "projection", "start": None, "covers": 1, "last_key": "id:m1"},
        {"kind": "projection", "start": 0, "covers": [], "last_key": "id:m1", "messages": [{}]},
        {"kind": "projection", "start": 0, "covers": 1, "last_key": "id:m1", "messages": [5]},
        {"kind": "projection", "start": 0, "covers": 1, "last_key": "id:m1", "messages": "x"},
        {"kind": "projection", "start": 0, "covers": 1, "last_key": "id:m1", "messages": []},
        {"kind": "projection", "start": -1, "covers": 1, "last_key": "id:m1", "messages": []},
        {
            "kind": "projection",
            "start": 0,
            "covers": 1,
            "last_key": "id:m1",
            "messages": [{"role": "nope", "content": "x"}],
        },
        {
            "kind": "projection",
            "start": 0,
            "covers": 1,
            "last_key": "id:m1",
            "messages": [{"role": "user", "content": _nested(150)}],
        },
        {"kind": "provider_compaction", "note": {"role": 5}, "item_key": "id:m1"},
        {"kind": "provider_compaction", "note": {"role": "user", "content": [5]}, "item_key": 1},
        {"kind": "model_call", "step": "7"},
        {"kind": "message", "message": {"id": 5, "role": []}},
        {"kind": "projection_cut", "cuts": "x"},
        {"kind": "projection_cut", "cuts": [5, None, {"key": 5}]},
        {"kind": "projection_cut", "cuts": [{"key": "id:m2", "given": "x", "message": {}}]},
        {"kind": "projection_cut", "cuts": [{"key": "id:m2", "given": 1, "message": {"x": 1}}]},
        {"kind": "model_call", "messages": ["m1", 5]},
        {"kind": "model_call", "messages": "m1"},
        [1, 2],
        "projection",
        None,
        7,
    ],
    ids=lambda line: json.dumps(line)[:60],
)
async def test_an_event_of_another_shape_is_skipped_and_the_history_sent(
    tmp_path: Path, line: Any
) -> None:
    # Each of these made every later projection of the session raise (ValueError,
    # TypeError, InvalidContent, AttributeError): every model call of the host failed.
    workspace = LocalWorkspace(tmp_path)
    _write_lines(workspace, "s", [json.dumps(line).encode()])
    sent = await Projector(workspace, "s", config=CONFIG).project(HISTORY)
    assert [m.text for m in sent] == ["where does the build fail?", "in step 3"]


@pytest.mark.parametrize(
    "message",
    [{"id": "m1", "role": []}, {"id": "m1", "role": "user", "content": _nested(150)}, [5]],
    ids=["no role", "nested", "no object"],
)
async def test_a_model_call_whose_messages_do_not_read_leaves_the_newest_turn_fresh(
    tmp_path: Path, message: Any
) -> None:
    # What the latest call was sent is taken up by a restarted process (which messages are
    # fresh): a call naming a message the record holds in no shape a message has is as no
    # call, and the history is projected as on a first call.
    workspace = LocalWorkspace(tmp_path)
    lines = [{"kind": "message", "message": message}, {"kind": "model_call", "messages": ["m1"]}]
    _write_lines(workspace, "s", [json.dumps(line).encode() for line in lines])
    sent = await Projector(workspace, "s", config=CONFIG).project(HISTORY)
    assert [m.text for m in sent] == ["where does the build fail?", "in step 3"]


async def test_a_damaged_decision_after_a_good_one_leaves_the_good_one_applied(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path)
    history = [Msg(role="system", content="s"), *plausible_session(120)]
    first = await Projector(workspace, "s", config=CONFIG).project(history)
    assert any(is_summary_message(m) for m in first)
    [decision] = [e for e in await workspace.read_events("s") if e["kind"] == "projection"]
    _write_lines(workspace, "s", [json.dumps({**decision, "messages": [5]}).encode(), b"{"])
    restarted = await Projector(workspace, "s", config=CONFIG).project(history)
    assert [m.model_dump() for m in restarted] == [m.model_dump() for m in first]


@pytest.mark.parametrize("item", [None, 5, "hello", b"hello", 2.5, ["x"]])
@pytest.mark.parametrize("at", [0, 1])
async def test_an_item_that_is_no_message_is_refused_naming_it(
    local_ws: LocalWorkspace, item: Any, at: int
) -> None:
    # As the first item it raised AttributeError (the leading system messages were counted
    # by `.get("role")` before any item was read).
    history: list[Any] = [{"role": "user", "content": "go"}]
    history.insert(at, item)
    with pytest.raises(InvalidContent, match=rf"Projector.project: history\[{at}\] is a "):
        await Projector(local_ws, "s", config=CONFIG).project(history)


@pytest.mark.parametrize("with_id", [False, True])
@pytest.mark.parametrize("levels", [150, 5_000])
async def test_a_message_nested_too_deeply_is_refused_naming_it(
    local_ws: LocalWorkspace, with_id: bool, levels: int
) -> None:
    # Without an id, hashing it for its key raised RecursionError at 5,000 levels.
    deep: dict[str, Any] = {"role": "user", "content": _nested(levels)}
    if with_id:
        deep["id"] = "deep"
    history = [{"role": "user", "content": "go"}, deep]
    with pytest.raises(InvalidContent, match=r"history\[1\] is nested deeper than 108 levels"):
        await Projector(local_ws, "s", config=CONFIG).project(history)
