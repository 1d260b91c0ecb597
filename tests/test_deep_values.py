"""Values nested thousands of levels deep, as hosts, tools, providers and models hand them
over (a host's `Msg` whose tool call input it parsed itself, a tool's JSON output, a summary
model's reply, a Converse `json` block): every path ctxoffload walks them on answers, and
none raises RecursionError. `_depth.py` holds the rules (`load_json`, `json_text`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Compressor,
    ContextConfig,
    InvalidContent,
    LocalWorkspace,
    Msg,
    ObjectStoreWorkspace,
    ScriptedModel,
    SessionBusyError,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
    to_anthropic,
    to_openai,
)
from ctxoffload.compression import ClearToolUses, Projector, ToolOutputOffload
from ctxoffload.formats import from_converse, to_converse
from ctxoffload.formats.responses import to_responses
from ctxoffload.text import message_text
from helpers import pipeline_run, plausible_session

LEVELS = 5_000


def _deep(levels: int = LEVELS) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


def _deep_call(call_id: str = "c1") -> list[Msg]:
    """A host's turn whose tool call input it parsed itself, 5,000 levels deep."""
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=call_id, name="f", input=_deep())]),
        Msg(role="tool", content=[ToolResultBlock(id=call_id, name="f", output="ok")]),
    ]


@pytest.mark.parametrize("exact", [False, True])
def test_a_tool_call_input_nested_5000_deep_is_counted(exact: bool) -> None:
    counter = get_token_counter("gpt-4o" if exact else None, exact=exact)
    [call, _] = _deep_call()
    assert counter.count_message(call) > 0
    looped: dict[str, Any] = {}
    looped["self"] = looped
    assert counter.count_tools([{"name": "f", "parameters": _deep()}]) > 0
    assert counter.count_message(
        Msg(role="assistant", content=[ToolCallBlock(id="c", name="f", input=looped)])
    )


async def test_a_host_history_holding_such_a_call_is_projected(local_ws: LocalWorkspace) -> None:
    history = [Msg(role="user", content="go"), *_deep_call(), *plausible_session(120)]
    projector = Projector(local_ws, "t1", config=ContextConfig(context_window=3000))
    sent = await projector.project(history)
    assert sent[-1].text == history[-1].text and len(sent) < len(history)


def test_such_a_call_reads_as_text_and_converts_where_its_format_holds_text() -> None:
    [call, result] = _deep_call()
    assert "leaf" in message_text(call)
    # Arguments as JSON text (OpenAI chat, the Responses API): written at any depth.
    assert "leaf" in str(to_openai([call, result]))
    assert "leaf" in str(to_responses([call, result]))
    # An input object (Anthropic, Converse) is copied: refused naming the call.
    for convert in (to_anthropic, to_converse):
        with pytest.raises(InvalidContent, match="the input of tool call 'c1' is nested deeper"):
            convert([call, result])


def test_arguments_read_as_text_show_a_shared_value_under_each_field_and_a_loop_once() -> None:
    shared = {"k": "v"}
    looped: dict[str, Any] = {"name": "x"}
    looped["self"] = looped
    call = ToolCallBlock(id="c", name="f", input={"a": shared, "b": shared, "c": looped})
    lines = message_text(Msg(role="assistant", content=[call])).splitlines()
    assert lines[2:] == ["  a.k: v", "  b.k: v", "  c.name: x"]


@pytest.mark.parametrize("convert", [to_openai, to_responses])
def test_a_call_input_json_has_no_text_for_is_refused_by_the_wire_formats_naming_it(
    convert: Any,
) -> None:
    # Written for counting and showing ("<cycle>", hex); sent to a provider as that, it
    # would be a value the host never had.
    looped: dict[str, Any] = {}
    looped["self"] = looped
    for bad in (looped, {"n": 10**5000}, {"deep": _deep(), "s": {1, 2}}):
        call = Msg(role="assistant", content=[ToolCallBlock(id="c9", name="f", input=bad)])
        assert message_text(call)
        with pytest.raises(InvalidContent, match=r"msgs\[0\] tool call 'c9' has input that is not"):
            convert([call])


async def test_a_tool_output_of_json_nested_5000_deep_is_offloaded(tmp_path: Path) -> None:
    # Its kind was told by json.loads, whose RecursionError kept the result whole.
    deep_json = "[" * LEVELS + "]" * LEVELS
    run = pipeline_run(
        LocalWorkspace(tmp_path),
        window=100_000,
        post=(ToolOutputOffload(max_tokens=100, preview_tokens=50),),
    )
    kept = await run.post_tool(ToolResultBlock(id="c1", name="f", output=deep_json))
    assert str(kept.output).startswith("[Offloaded: 1 block")
    assert (tmp_path / "sessions" / "s1" / "tool_result-c1.txt").read_text() == deep_json


@pytest.mark.slow
async def test_clearing_a_call_whose_input_nests_5000_deep_stores_its_input(
    tmp_path: Path,
) -> None:
    run = pipeline_run(
        LocalWorkspace(tmp_path), ClearToolUses(keep=0, clear_tool_inputs=True), window=100_000
    )
    [call, _] = _deep_call()
    result = Msg(role="tool", content=[ToolResultBlock(id="c1", name="f", output="row\n" * 500)])
    history = [Msg(role="user", content="go"), call, result, Msg(role="user", content="next")]
    await run.pre_llm(history)
    after = (await run.pre_llm([*history, Msg(role="assistant", content="ok")])).messages
    [call] = [b for m in after for b in m.tool_calls]
    assert "cleared" in call.input, call.input
    stored = tmp_path / "sessions" / "s1" / "tool_result-c1-input.txt"
    assert stored.read_text().count("leaf") == 1


def test_a_converse_json_block_edited_to_nest_5000_deep_is_sent_as_text() -> None:
    messages = [
        {"role": "user", "content": [{"text": "go"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "c", "name": "f", "input": {}}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "c", "content": [{"json": {"a": 1}}]}}],
        },
    ]
    msgs = from_converse(messages)
    result = msgs[2].content[0]
    assert isinstance(result, ToolResultBlock) and not isinstance(result.output, str)
    deep_text = "[" * LEVELS + "]" * LEVELS
    edited = result.model_copy(
        update={"output": [result.output[0].model_copy(update={"text": deep_text})]}
    )
    msgs[2] = msgs[2].model_copy(update={"content": [edited]})
    _, converse = to_converse(msgs)
    [item] = converse[2]["content"][0]["toolResult"]["content"]
    assert item == {"text": deep_text}


async def test_a_log_line_nested_5000_deep_leaves_offloading_working(tmp_path: Path) -> None:
    # A log another writer (or an older release, without a commit record) left: the index of
    # its messages read each line with json.loads, and offload_context raised RecursionError.
    folder = tmp_path / "sessions" / "s"
    folder.mkdir(parents=True)
    deep = "[" * LEVELS + "]" * LEVELS
    (folder / "context.jsonl").write_text(
        '{"id": "a", "role": "user", "content": "a"}\n'
        + '{"id": "x", "role": "user", "content": '
        + deep
        + "}\n"
    )
    ws = LocalWorkspace(tmp_path)
    message = Msg(role="user", content="b", id="b")
    ref = await ws.offload_context("s", [message])
    assert ref.spans == ((3, 3),)
    again = await ws.offload_context("s", [message])  # found where it is, not written twice
    assert again.spans == ((3, 3),)


async def test_a_summary_model_answering_json_nested_5000_deep_is_a_bad_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    compressor = Compressor(
        ContextConfig(context_window=3000),
        model=ScriptedModel(default="[" * LEVELS + "]" * LEVELS),
        offloader=LocalWorkspace(tmp_path),
        session_id="s",
        counter=get_token_counter(exact=False),
    )
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        result = await compressor.maybe_compress(plausible_session(120))
    assert result.compressed and result.summary_source == "extractive"
    said = " ".join(r.getMessage() for r in caplog.records)
    # Read as any reply is (no object of the summary's fields in it), never recursed into.
    assert "holds no field of the summary" in said and "recursion" not in said, said


@pytest.mark.parametrize("backend", ["local", "bucket"])
async def test_a_lease_record_nested_5000_deep_reads_as_none(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # Each store read its lease record with json.loads: a record edited by hand into this
    # raised RecursionError from every agent that opened the session.
    deep = ("[" * LEVELS + "]" * LEVELS).encode()
    ws: Any
    if backend == "local":
        folder = tmp_path / "sessions" / "s"
        folder.mkdir(parents=True)
        (folder / "lease.json").write_bytes(deep)
        ws = LocalWorkspace(tmp_path)
    else:
        s3 = request.getfixturevalue("s3")
        bucket = s3.new_bucket()
        s3.put_object(bucket, "p/sessions/s/lease.json", deep)
        ws = ObjectStoreWorkspace(f"s3://{bucket}/p", **s3.workspace_kwargs())
        # In a bucket a lease object whose record reads as none is held until it lapses by
        # the store's clock: the session is busy, said so, naming no holder.
        with pytest.raises(SessionBusyError, match=r"a writer \(pid \? on \?\)"):
            await ws.acquire_lease("s", agent="next")
        return
    lease = await ws.acquire_lease("s", agent="next")
    assert lease.holder["agent"] == "next"
    await lease.release()


@pytest.mark.parametrize(
    "text",
    [
        '{"role":"user","content":"hello"}',
        '  {"a": 1}',
        '{"a": 1}  ',
        '{"a": 1}\r',
        '{"a": 1}{"b": 2}',
        '{"a": 1} x',
        "\ufeff{}",
        "[1, 2.5, null, true]",
        '"text"',
        "12",
        "NaN",
        '{"a": ',
        "nul",
        "",
    ],
)
def test_a_log_line_is_read_as_json_loads_reads_it(text: str) -> None:
    """`load_json` reads a text as `json.loads` does, the same value or a ValueError, though
    a line that is one value and nothing else is read without json.loads's own passes."""
    import json

    from ctxoffload._depth import load_json

    try:
        expected: Any = json.loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError) as raised:
            load_json(text)
        assert type(raised.value) is type(exc)
        assert str(raised.value) == str(exc)
    else:
        assert repr(load_json(text)) == repr(expected)
