"""A provider's compaction block or item goes through ctxoffload's messages unchanged."""

from __future__ import annotations

import copy
import json

from ctxoffload import LocalWorkspace, Msg
from ctxoffload.formats import from_anthropic, to_anthropic, to_msgs
from ctxoffload.formats.provider_compaction import HOST_ITEM_KEY, compaction_item
from ctxoffload.formats.responses import from_responses, to_responses
from provider_shapes import (
    ANTHROPIC_RESPONSE,
    ANTHROPIC_TOOL_RESPONSE,
    OPENAI_COMPACTED_RESPONSE,
    OPENAI_COMPACTION_ITEM,
    OPENAI_RESPONSE,
    anthropic_message,
)

HISTORY = [
    {"role": "user", "content": "Why does the nightly export fail?"},
    anthropic_message(ANTHROPIC_RESPONSE),
    {"role": "user", "content": "Write the migration."},
]


def test_an_anthropic_compaction_block_round_trips_with_its_message() -> None:
    msgs = from_anthropic(HISTORY)
    assert to_anthropic(msgs) == (None, HISTORY)
    found = compaction_item(msgs[1])
    assert found is not None and found.provider == "anthropic"
    assert found.item == ANTHROPIC_RESPONSE["content"][0]
    assert found.summary.startswith("## Summary")


def test_to_msgs_reads_a_message_holding_only_a_compaction_block_as_anthropic() -> None:
    # pause_after_compaction: the response is the compaction block alone.
    paused = {"role": "assistant", "content": [ANTHROPIC_RESPONSE["content"][0]]}
    msgs = to_msgs([HISTORY[0], paused])
    assert compaction_item(msgs[1]) is not None
    assert to_anthropic(msgs)[1][1] == paused


def test_a_compaction_block_beside_a_tool_call_keeps_its_place_and_fields() -> None:
    block = {
        **ANTHROPIC_TOOL_RESPONSE["content"][0],
        "encrypted_content": "opaque==",
        "cache_control": {"type": "ephemeral"},
    }
    message = {"role": "assistant", "content": [block, ANTHROPIC_TOOL_RESPONSE["content"][1]]}
    (msg,) = to_msgs([message])
    assert [c.id for c in msg.tool_calls] == ["toolu_01A09q90qw90lq917835lq9"]
    assert to_anthropic([msg])[1] == [message]


def test_a_failed_compaction_null_content_round_trips_and_has_no_summary() -> None:
    message = {"role": "assistant", "content": [{"type": "compaction", "content": None}]}
    (msg,) = to_msgs([message])
    found = compaction_item(msg)
    assert found is not None and found.summary == ""
    assert to_anthropic([msg])[1] == [message]


def test_a_responses_compaction_item_round_trips_opaque() -> None:
    items = [
        {"type": "message", "role": "user", "content": "Why does the nightly export fail?"},
        *copy.deepcopy(OPENAI_RESPONSE["output"]),
    ]
    msgs = from_responses(items)
    found = compaction_item(msgs[1])
    assert found is not None and found.provider == "openai"
    assert found.item_id == OPENAI_COMPACTION_ITEM["id"] and found.summary == ""
    assert to_responses(msgs)[1] == OPENAI_COMPACTION_ITEM


def test_the_compacted_window_of_responses_compact_round_trips() -> None:
    output = OPENAI_COMPACTED_RESPONSE["output"]
    msgs = from_responses(output)
    assert compaction_item(msgs[-1]) is not None
    assert to_responses(msgs)[-1] == output[-1]


def test_compaction_item_finds_the_provider_dicts_and_nothing_else() -> None:
    assert compaction_item(OPENAI_COMPACTION_ITEM) is not None
    assert compaction_item(anthropic_message(ANTHROPIC_RESPONSE)) is not None
    lookalikes: list[object] = [
        {"role": "user", "content": "compaction"},
        {"role": "user", "content": [{"type": "text", "text": '{"type": "compaction"}'}]},
        {"type": "message", "role": "user", "content": "x"},
        Msg(role="user", content="compaction"),
        Msg(role="assistant", content=[], metadata={"anthropic": {"unknown": "junk"}}),
        Msg(role="assistant", content=[], metadata={"responses_item": ["compaction"]}),
        "compaction",
        None,
    ]
    assert [compaction_item(x) for x in lookalikes] == [None] * len(lookalikes)  # type: ignore[arg-type]


async def test_a_message_holding_a_compaction_comes_back_from_context_jsonl_unchanged(
    local_ws: LocalWorkspace,
) -> None:
    msgs = [*from_anthropic(HISTORY), *from_responses(OPENAI_RESPONSE["output"])]
    await local_ws.offload_context("s", msgs=msgs)
    lines = (local_ws.session_dir("s") / "context.jsonl").read_text().splitlines()
    back = to_msgs([json.loads(line) for line in lines])
    assert to_anthropic(back[:3]) == (None, HISTORY)
    assert to_responses(back[3:4]) == [OPENAI_COMPACTION_ITEM]


def test_an_item_a_host_named_on_its_msg_is_found_and_a_malformed_one_is_not() -> None:
    # A host converter (pydantic-ai's CompactionPart) names the item under HOST_ITEM_KEY.
    named = {"provider": "openai", "item": dict(OPENAI_COMPACTION_ITEM)}
    found = compaction_item(Msg(role="assistant", content="ok", metadata={HOST_ITEM_KEY: named}))
    assert found is not None and found.provider == "openai"
    assert found.item == OPENAI_COMPACTION_ITEM and found.item_id == OPENAI_COMPACTION_ITEM["id"]
    found.item["id"] = "changed"  # a copy: the message keeps its own
    assert named["item"]["id"] == OPENAI_COMPACTION_ITEM["id"]
    for bad in ("x", {"provider": "openai"}, {"item": {"type": "text"}}, {"item": "compaction"}):
        assert (
            compaction_item(Msg(role="assistant", content="", metadata={HOST_ITEM_KEY: bad}))
            is None
        )
