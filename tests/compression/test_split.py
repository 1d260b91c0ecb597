"""The split: newest turns within the reserve stay, tool calls stay with their results."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import (
    TRUNCATION_MARKER,
    Compressor,
    SplitByCount,
    SplitByTokens,
    Summarization,
    turns,
)
from ctxoffload.compression._split import split_by_count, split_for_compression
from ctxoffload.compression._turns import (  # the private units under test
    newest_turns,
    turn_start,
)
from helpers import SUMMARY, examples

COUNTER = get_token_counter(exact=False)


def user(text: str) -> Msg:
    return Msg(role="user", content=text)


def assistant(text: str) -> Msg:
    return Msg(role="assistant", content=text)


def calls(*ids: str, size: int = 10) -> Msg:
    return Msg(
        role="assistant",
        content=[ToolCallBlock(id=i, name="bash", input={"cmd": "x" * size}) for i in ids],
    )


def results(*ids: str, size: int = 100) -> Msg:
    return Msg(
        role="tool", content=[ToolResultBlock(id=i, name="bash", output="y" * size) for i in ids]
    )


def cost(msgs: Sequence[Msg]) -> int:
    return sum(COUNTER.count_message(m) for m in msgs)


def conversation() -> list[Msg]:
    """A session with every turn shape: several calls in one message, results together or
    apart, plain replies and user requests in between."""
    return [
        user("fix the failing test " * 5),
        calls("a1", "a2", "a3"),
        results("a1", "a2", "a3", size=400),
        assistant("looked at three files " * 8),
        calls("b1", "b2"),
        results("b1", size=300),
        results("b2", size=250),
        user("also update the changelog " * 4),
        calls("c1"),
        results("c1", size=600),
        calls("d1", "d2", "d3"),
        results("d2", size=100),
        results("d1", "d3", size=200),
        assistant("done: tests pass " * 6),
    ]


def test_turns_group_a_call_message_with_all_of_its_results() -> None:
    msgs = conversation()
    assert turns(msgs) == [
        (0, 1, True),
        (1, 3, True),
        (3, 4, True),
        (4, 7, True),
        (7, 8, True),
        (8, 10, True),
        (10, 13, True),
        (13, 14, True),
    ]


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    shape=st.lists(
        st.tuples(
            st.sampled_from(["user", "calls", "results", "calls+results"]),
            st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=14,
    )
)
def test_the_turn_of_any_message_is_found_reading_back_only_a_little(
    shape: list[tuple[str, list[str]]],
) -> None:
    # Any mix: results without calls, repeated ids, a message with results and calls.
    msgs: list[Msg] = []
    for kind, ids in shape:
        if kind == "user":
            msgs.append(user("next"))
        elif kind == "calls":
            msgs.append(calls(*ids))
        elif kind == "results":
            msgs.append(results(*ids))
        else:
            blocks = results(*ids).content + calls(*(i + "x" for i in ids)).content
            msgs.append(Msg(role="assistant", content=blocks))
    starts = {}
    for start, end, _ in turns(msgs):
        for i in range(start, end):
            starts[i] = start
    assert [turn_start(msgs, i) for i in range(len(msgs))] == [starts[i] for i in range(len(msgs))]
    # And the newest turns, found back from the end as a split asks for them, are the turns.
    assert list(newest_turns(msgs)) == list(reversed(turns(msgs)))


# Every reserve from nothing to the whole conversation, so each turn boundary is tried.
RESERVES = range(0, 2000, 3)


def test_the_newest_turns_within_the_reserve_stay_and_no_turn_is_cut() -> None:
    for reserve in RESERVES:
        check_split(conversation(), reserve)


def check_split(msgs: list[Msg], reserve: int) -> None:
    split = split_for_compression(msgs, COUNTER, reserve)
    kept_from = len(msgs) - len(split.kept)
    assert split.kept == msgs[kept_from:]
    # The cut falls on a turn boundary...
    assert kept_from in {start for start, _, _ in turns(msgs)} | {len(msgs)}
    # ...the kept turns fit, and the next older turn would not have.
    assert cost(split.kept) <= reserve
    older_turns = [t for t in turns(msgs) if t[1] <= kept_from]
    if older_turns:
        start, end, _ = older_turns[-1]
        assert cost(msgs[start:end]) + cost(split.kept) > reserve
    # Nothing is lost or duplicated.
    everything = split.older + ([split.pinned] if split.pinned else []) + split.kept
    assert sorted(m.id for m in everything) == sorted(m.id for m in msgs)


def test_a_tool_call_message_is_never_separated_from_its_results() -> None:
    msgs = conversation()
    assert cost(msgs) < RESERVES[-1]
    for reserve in RESERVES:
        split = split_for_compression(msgs, COUNTER, reserve)
        kept_ids = {m.id for m in split.kept}
        for msg in msgs:
            for call in msg.tool_calls:
                holders = [m for m in msgs if any(r.id == call.id for r in m.tool_results)]
                assert holders
                assert all((h.id in kept_ids) == (msg.id in kept_ids) for h in holders), reserve


@pytest.mark.parametrize("answered", [(), ("n1",)])
def test_an_unfinished_newest_call_stays_even_over_the_reserve(answered: tuple[str, ...]) -> None:
    msgs = conversation()
    msgs.append(calls("n1", "n2", size=5000))
    if answered:
        msgs.append(results(*answered, size=3000))
    split = split_for_compression(msgs, COUNTER, reserve_tokens=50)
    assert split.kept == msgs[-1 - len(answered) :]
    assert cost(split.kept) > 50


def test_an_unanswered_call_further_back_is_compressed() -> None:
    msgs = [user("start"), calls("dead"), user("never mind, do this instead"), assistant("ok")]
    split = split_for_compression(msgs, COUNTER, reserve_tokens=cost(msgs[3:]))
    assert msgs[1] in split.older
    assert split.kept == [msgs[3]]
    assert split.pinned is msgs[2]  # the latest request, older than the kept part


def test_the_latest_request_is_pinned_when_older_than_the_kept_part() -> None:
    msgs = conversation()
    split = split_for_compression(msgs, COUNTER, reserve_tokens=cost(msgs[-4:]))
    assert split.pinned is msgs[7]
    assert msgs[7] not in split.older
    assert msgs[0] in split.older  # an earlier request is compressed


def compressor(ws: LocalWorkspace, window: int = 4000) -> Compressor:
    return Compressor(
        ContextConfig(context_window=window),
        model=ScriptedModel(default=SUMMARY),
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )


async def test_the_system_prompt_is_never_compressed(local_ws: LocalWorkspace) -> None:
    system = Msg(role="system", content="You are a careful agent. " * 40)
    msgs = [system, *conversation()]
    result = await compressor(local_ws).maybe_compress(msgs, force=True)
    assert result.compressed
    assert result.messages[0] is system
    logged = await local_ws.read_context("s1")
    assert system.id not in {row["id"] for row in logged}
    assert all(row["role"] != "system" for row in logged)


async def test_the_latest_request_stays_verbatim_right_after_the_summary(
    local_ws: LocalWorkspace,
) -> None:
    system = Msg(role="system", content="sys")
    msgs = [system, *conversation()]
    request = msgs[8]
    assert request.text.startswith("also update the changelog")
    result = await compressor(local_ws).maybe_compress(msgs, force=True)
    assert result.compressed
    summary, pinned = result.messages[1], result.messages[2]
    assert "<context_summary>" in summary.text
    assert pinned is request
    assert request.id not in {row["id"] for row in await local_ws.read_context("s1")}


async def test_a_request_larger_than_the_reserve_is_offloaded_whole_and_cut(
    local_ws: LocalWorkspace,
) -> None:
    text = "\n".join(f"requirement {i}: the report must include section {i}" for i in range(400))
    request = user(text)
    msgs = [
        Msg(role="system", content="sys"),
        user("first"),
        assistant("ok"),
        request,
        calls("x1"),
        results("x1", size=200),
    ]
    comp = compressor(local_ws)
    reserve = comp.config.reserve_tokens(4000)
    assert COUNTER.count_text(text) > reserve
    result = await comp.maybe_compress(msgs, force=True)

    assert result.compressed
    cut = next(m for m in result.messages if m.id == request.id)
    assert result.messages.index(cut) == 2  # pinned right after the summary
    assert TRUNCATION_MARKER in cut.text
    assert COUNTER.count_text(cut.text) <= reserve
    path = local_ws.session_dir("s1") / f"tool_result-user-{request.id}.txt"
    assert str(path) in cut.text
    assert path.read_text() == text
    assert cut.text.startswith("requirement 0: ")
    assert str(path) in result.messages[1].text  # the artifact trail names it too


async def test_the_split_strategy_given_chooses_what_leaves(local_ws: LocalWorkspace) -> None:
    msgs = [Msg(role="system", content="sys"), *conversation()]
    comp = compressor(local_ws, window=20_000)
    by_count = split_by_count(msgs[1:], 0.5, 2)
    by_tokens = split_for_compression(msgs[1:], comp.tracker, comp.config.reserve_tokens(20_000))
    assert len(by_count.older) != len(by_tokens.older)

    counted = await comp.maybe_compress(msgs, force=True, split=SplitByCount(0.5, 2))
    assert counted.compressed_messages == len(by_count.older)
    assert [row["id"] for row in await local_ws.read_context("s1")] == [
        m.id for m in by_count.older
    ]
    tokens = await compressor(local_ws, window=20_000).maybe_compress(msgs, force=True)
    assert tokens.compressed_messages == len(by_tokens.older)


def test_summarization_splits_by_tokens_for_a_config_and_by_count_otherwise() -> None:
    assert Summarization.from_config(ContextConfig()).split_strategy() == SplitByTokens()
    manager = Summarization(summary_ratio=0.4, preserve_recent_messages=3)
    assert manager.split_strategy() == SplitByCount(0.4, 3)
