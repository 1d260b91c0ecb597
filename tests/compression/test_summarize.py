"""Summaries: the schema is sent, replies are validated and retried, big inputs are chunked,
and a failing model gives an extractive summary, never its error text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx2
import openai
import pytest

from ctxoffload import (
    ContextConfig,
    ContextOverflowError,
    LocalWorkspace,
    ModelError,
    ModelResponse,
    Msg,
    ScriptedModel,
    Summary,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import Compressor
from ctxoffload.compression._summarize import (
    extractive_summary,
    summarize,  # the private unit under test
)
from helpers import SUMMARY, plausible_session, summary_reply

COUNTER = get_token_counter(exact=True)
FIELDS = tuple(Summary.model_fields)


def prompt_text(call: Sequence[Msg]) -> str:
    return "\n".join(m.text for m in call)


async def run(model: ScriptedModel, config: ContextConfig | None = None, **kwargs: Any) -> Any:
    return await summarize(
        plausible_session(12),
        model=model,
        config=config or ContextConfig(),
        counter=COUNTER,
        **kwargs,
    )


async def test_the_request_carries_the_configured_schema() -> None:
    schema = Summary.model_json_schema()
    schema["title"] = "CustomSummary"
    for config in (ContextConfig(), ContextConfig(summary_schema=schema)):
        model = ScriptedModel([summary_reply("ok")])
        await run(model, config)
        assert model.schemas_seen == [config.summary_schema]
        system, request = model.calls[0]
        assert system.role == "system" and system.text == config.compression_prompt
        assert "request 0:" in request.text and "statement 11:" in request.text


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(summary_reply("plain")),
        "```json\n" + json.dumps(summary_reply("plain"), indent=2) + "\n```",
        "```\n" + json.dumps(summary_reply("plain")) + "\n```",
        json.dumps({**summary_reply("plain"), "extra_key": "ignored"}),
    ],
)
async def test_a_valid_reply_becomes_the_summary(reply: str) -> None:
    model = ScriptedModel([reply])
    outcome = await run(model)
    assert outcome.source == "model"
    assert outcome.summary == Summary(**summary_reply("plain"))
    assert outcome.model_calls == 1


INVALID = [
    "Sure! Here is a summary of the conversation.",
    json.dumps({"summary": "no field of the summary's"}),
    json.dumps({name: "  " for name in FIELDS}),
    json.dumps({name: "I'm sorry, but I can't help with that." for name in FIELDS}),
    "```json\n{not json}\n```",
]


async def test_a_reply_missing_fields_is_used_and_the_rest_comes_from_the_extract() -> None:
    model = ScriptedModel([json.dumps({"task_overview": "only one field"})])
    outcome = await run(model)
    assert outcome.source == "model" and outcome.model_calls == 1
    assert outcome.summary.task_overview == "only one field"
    assert outcome.filled == FIELDS[1:]
    assert outcome.summary.current_state.startswith("Last assistant message:")


async def test_an_object_inside_a_list_is_read() -> None:
    outcome = await run(ScriptedModel([json.dumps([summary_reply("in a list")])]))
    assert outcome.source == "model" and outcome.reply == "prose"
    assert outcome.summary == Summary(**summary_reply("in a list"))


@pytest.mark.parametrize("retries", [0, 1, 3])
@pytest.mark.parametrize("reply", INVALID)
async def test_invalid_replies_are_retried_then_the_summary_is_extractive(
    reply: str, retries: int
) -> None:
    model = ScriptedModel([reply] * (retries + 1), default=summary_reply("too late"))
    outcome = await run(model, ContextConfig(summary_max_retries=retries))
    assert len(model.calls) == retries + 1
    assert outcome.source == "extractive"
    assert "too late" not in outcome.summary.model_dump_json()
    assert "request 0:" in outcome.summary.task_overview


async def test_a_valid_reply_after_invalid_ones_is_used() -> None:
    model = ScriptedModel([INVALID[0], INVALID[2], summary_reply("third time")])
    outcome = await run(model, ContextConfig(summary_max_retries=2))
    assert outcome.source == "model"
    assert outcome.summary.task_overview == "third time task_overview"
    assert len(model.calls) == 3


@pytest.mark.parametrize(
    "failure",
    [
        ModelError("upstream said: quota exceeded for key XYZZY-1234"),
        RuntimeError("connection reset XYZZY-1234"),
        "Error: the model is overloaded (XYZZY-1234), try again later",
        json.dumps({"error": {"message": "XYZZY-1234 rate limited"}}),
    ],
)
async def test_an_error_never_becomes_the_summary(failure: Any, local_ws: LocalWorkspace) -> None:
    model = ScriptedModel(default=failure, context_window=200_000)
    comp = Compressor(
        ContextConfig(context_window=2000),
        model=model,
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    msgs = [Msg(role="system", content="sys"), *plausible_session(60)]
    result = await comp.maybe_compress(msgs)

    assert result.compressed
    assert result.summary_source == "extractive"
    assert len(model.calls) == comp.config.summary_max_retries + 1
    assert "XYZZY" not in result.summary.model_dump_json()
    for msg in result.messages:
        assert "XYZZY" not in msg.model_dump_json()
    assert "request 0:" in result.messages[1].text  # the extractive summary took its place


def chunk_summaries() -> Any:
    count = 0

    def reply(messages: Sequence[Msg]) -> dict[str, str]:
        nonlocal count
        count += 1
        return summary_reply(f"chunk-summary-{count}")

    return reply


async def test_inputs_beyond_the_models_window_are_summarised_in_chunks_that_fold() -> None:
    model = ScriptedModel(default=chunk_summaries(), context_window=2000)
    msgs = plausible_session(300)
    outcome = await summarize(msgs, model=model, config=ContextConfig(), counter=COUNTER)

    assert outcome.source == "model"
    assert len(model.calls) == outcome.chunks >= 5
    for call in model.calls:
        assert COUNTER.count_messages(call) <= 2000
    for k in range(1, len(model.calls)):
        assert f"chunk-summary-{k} task_overview" in prompt_text(model.calls[k])
        assert f"chunk-summary-{k - 1} " not in prompt_text(model.calls[k])
    assert outcome.summary.task_overview == f"chunk-summary-{len(model.calls)} task_overview"
    # Every message went to the model in exactly one chunk, in order.
    seen = "\n".join(prompt_text(call) for call in model.calls)
    positions = [seen.find(f"{'request' if i % 4 == 0 else 'statement'} {i}:") for i in range(300)]
    kept = [p for i, p in enumerate(positions) if i % 4 in (0, 3)]
    assert -1 not in kept and kept == sorted(kept)


async def test_what_fits_the_window_beside_the_reply_goes_in_one_call() -> None:
    """A chunk takes the summary model's window but a spare tenth, the instructions, the
    summary so far and room for the reply (at most a quarter of the window): what leaves an
    agent's loop at 8,000 tokens (4,000 to 5,000) is one call, not two."""
    window = 8000
    model = ScriptedModel(default=chunk_summaries(), context_window=window)
    msgs = plausible_session(100)
    sent = COUNTER.count_messages(msgs)
    assert 4000 < sent < 5000

    outcome = await summarize(msgs, model=model, config=ContextConfig(), counter=COUNTER)

    assert outcome.source == "model"
    assert len(model.calls) == outcome.chunks == 1
    # Half as much again: two calls, each leaving the reply its room under the window.
    model = ScriptedModel(default=chunk_summaries(), context_window=window)
    outcome = await summarize(
        plausible_session(170), model=model, config=ContextConfig(), counter=COUNTER
    )
    assert outcome.source == "model"
    assert len(model.calls) == outcome.chunks == 2
    # The reply keeps its room within the window (the spare tenth absorbs the request's own
    # framing and a tokenizer that counts more), and the first chunk takes more than the half
    # of the window chunks used to be given.
    reply_room = min(ContextConfig().summary_budget_tokens(window), window // 4)
    sizes = [COUNTER.count_messages(call) for call in model.calls]
    assert all(size <= window - reply_room for size in sizes)
    assert sizes[0] > window // 2


async def test_a_summary_so_far_dense_in_tokens_is_counted_as_sent() -> None:
    """The summary a model wrote for one chunk rides in the next call: bound in characters,
    it may take far more tokens than its bound says (text of short tokens). Each call is
    sized from the summary it carries, counted: none is over the window with its reply's
    room, and where no chunk fits beside it any more the extract takes over."""
    dense = {field: "x1 " * 400 for field in Summary.model_fields}
    for window in (4000, 8000, 16000):
        model = ScriptedModel(default=lambda _: dense, context_window=window)
        config = ContextConfig(context_window=window)
        outcome = await summarize(
            plausible_session(400, words=30), model=model, config=config, counter=COUNTER
        )
        reply_room = min(config.summary_budget_tokens(window), window // 4)
        assert model.calls
        for call in model.calls:
            assert COUNTER.count_messages(call) + reply_room <= window
        assert outcome.source == ("extractive" if window == 4000 else "model")


async def test_a_context_overflow_makes_it_retry_with_smaller_chunks() -> None:
    limit = 1000
    replies = chunk_summaries()

    def strict(messages: Sequence[Msg]) -> dict[str, str]:
        if COUNTER.count_messages(messages) > limit:
            raise ContextOverflowError(f"prompt is over {limit} tokens")
        return replies(messages)  # type: ignore[no-any-return]

    model = ScriptedModel(default=strict, context_window=2000)
    outcome = await summarize(
        plausible_session(120), model=model, config=ContextConfig(), counter=COUNTER
    )

    sizes = [COUNTER.count_messages(call) for call in model.calls]
    assert sizes[0] > limit  # the first attempt overflowed...
    assert outcome.source == "model"  # ...and smaller chunks then succeeded
    succeeded = [s for s in sizes if s <= limit]
    assert len(succeeded) == outcome.chunks
    assert outcome.chunks > 1


def openai_overflow(tokens: int, limit: int) -> Exception:
    """The openai SDK's own error for a prompt over the window: a 400 whose body's code is
    `context_length_exceeded`, as a host's model (LlamaIndex's, CrewAI's through LiteLLM)
    lets it through its adapter."""
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {
        "message": f"This model's maximum context length is {limit} tokens. However, your "
        f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    response = httpx2.Response(400, request=request)
    return openai.BadRequestError("Error code: 400", response=response, body=body)


class ContextWindowOverflowException(Exception):
    """Named as Strands' overflow (`is_context_overflow` knows it by its name)."""


class ProviderModel:
    """A summary model whose provider refuses a request over `limit` tokens in its own
    words, never as ctxoffload's `ContextOverflowError`."""

    model_name = "provider-model"
    context_window = 2000

    def __init__(self, limit: int, refusal: Any) -> None:
        self.limit, self.refusal = limit, refusal
        self.sizes: list[int] = []
        self.replies = chunk_summaries()

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        size = COUNTER.count_messages(messages)
        self.sizes.append(size)
        if size > self.limit:
            raise self.refusal(size, self.limit)
        reply = json.dumps(self.replies(messages))
        return ModelResponse(message=Msg(role="assistant", content=reply))


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(openai_overflow, id="openai-sdk-400"),
        pytest.param(
            lambda tokens, limit: ContextWindowOverflowException(f"{tokens} > {limit}"),
            id="host-overflow-class",
        ),
    ],
)
async def test_a_providers_own_overflow_error_halves_the_request(refusal: Any) -> None:
    model = ProviderModel(1000, refusal)
    outcome = await summarize(
        plausible_session(120), model=model, config=ContextConfig(), counter=COUNTER
    )

    assert model.sizes[0] > model.limit  # the first request overflowed...
    assert model.sizes[1] < model.sizes[0]  # ...and was halved, not asked again whole
    assert outcome.source == "model"
    assert outcome.chunks == len([size for size in model.sizes if size <= model.limit]) > 1


async def test_a_model_that_always_overflows_gives_an_extractive_summary() -> None:
    model = ScriptedModel(default=ContextOverflowError("too long"), context_window=2000)
    outcome = await summarize(
        plausible_session(40), model=model, config=ContextConfig(), counter=COUNTER
    )
    assert outcome.source == "extractive"
    assert 1 <= len(model.calls) <= 3


async def test_the_previous_summary_is_folded_into_the_next_one(local_ws: LocalWorkspace) -> None:
    model = ScriptedModel([summary_reply("FIRST-MARK"), summary_reply("SECOND-MARK")])
    comp = Compressor(
        ContextConfig(context_window=3000),
        model=model,
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    first = await comp.maybe_compress(plausible_session(40), force=True)
    assert first.summary == Summary(**summary_reply("FIRST-MARK"))
    assert "FIRST-MARK" not in prompt_text(model.calls[0])
    second = await comp.maybe_compress([*first.messages, *plausible_session(40)], force=True)
    assert "FIRST-MARK task_overview" in prompt_text(model.calls[1])
    assert second.summary == Summary(**summary_reply("SECOND-MARK"))
    assert "SECOND-MARK" in second.messages[0].text
    assert "FIRST-MARK" not in second.messages[0].text


async def test_the_previous_summary_is_folded_into_an_extractive_one() -> None:
    previous = Summary(**summary_reply("EARLIER"))
    outcome = await summarize(
        plausible_session(8), model=None, config=ContextConfig(), counter=COUNTER, previous=previous
    )
    assert outcome.source == "extractive"
    assert "EARLIER task_overview" in outcome.summary.task_overview
    assert "EARLIER important_discoveries" in outcome.summary.important_discoveries
    assert "EARLIER context_to_preserve" in outcome.summary.context_to_preserve


def test_the_extractive_summary_keeps_requests_statement_tools_and_files() -> None:
    msgs = [
        Msg(role="user", content="FIRST: port the parser to Rust, keep the public API"),
        Msg(role="assistant", content=[ToolCallBlock(id="1", name="grep", input={"p": "x"})]),
        Msg(role="tool", content=[ToolResultBlock(id="1", name="grep", output="a.py:3: x")]),
        Msg(role="assistant", content=[ToolCallBlock(id="2", name="bash", input={"c": "make"})]),
        Msg(
            role="tool",
            content=[ToolResultBlock(id="2", name="bash", output="E: no rule", is_error=True)],
        ),
        Msg(role="assistant", content=[ToolCallBlock(id="3", name="grep", input={"p": "y"})]),
        Msg(role="tool", content=[ToolResultBlock(id="3", name="grep", output="b.py:9: y")]),
        Msg(role="user", content="LATEST: also add benchmarks"),
        Msg(role="assistant", content="STATEMENT: benchmarks are in bench/, parser half done"),
    ]
    artifact = "ws/sessions/s1/tool_result-2.txt (1.2 KB, 40 lines, from bash)"
    summary = extractive_summary(msgs, artifacts=[artifact])
    assert "FIRST: port the parser to Rust, keep the public API" in summary.task_overview
    assert "LATEST: also add benchmarks" in summary.task_overview
    assert "STATEMENT: benchmarks are in bench/" in summary.current_state
    assert "grep x2" in summary.important_discoveries
    assert "bash x1" in summary.important_discoveries
    assert "E: no rule" in summary.important_discoveries
    assert artifact in summary.context_to_preserve


def test_the_extractive_summary_quotes_the_start_of_a_long_last_statement() -> None:
    # Where the work stands, in a few lines: the statement is whole in the context log, and
    # every compaction at a small window sends the summary again until the next one.
    statement = "STATEMENT: the parser is half done. " + "Reasoning goes on. " * 200
    summary = extractive_summary([Msg(role="assistant", content=statement)])
    quoted = summary.current_state.removeprefix("Last assistant message: ")
    assert statement.startswith(quoted.removesuffix("…"))
    assert 500 <= len(quoted) <= 600


async def test_without_a_model_the_compressor_writes_an_extractive_summary(
    local_ws: LocalWorkspace,
) -> None:
    comp = Compressor(
        ContextConfig(context_window=3000), offloader=local_ws, session_id="s1", counter=COUNTER
    )
    result = await comp.maybe_compress(plausible_session(40), force=True)
    assert result.summary_source == "extractive"
    text = result.messages[0].text
    logged = await local_ws.read_context("s1")
    statements = [r["content"] for r in logged if str(r["content"]).startswith("statement")]
    assert len(logged) == result.compressed_messages > 20
    assert "request 0:" in text  # the first request
    assert statements[-1][:40] in text  # the last assistant statement compressed
    assert "grep x" in text


def test_chunks_are_sized_from_known_counts_when_given() -> None:
    from ctxoffload.compression._summarize import _take

    counter = get_token_counter(exact=False)
    entries = ["a" * 400, "b" * 400, "c" * 400]  # ~100 tokens each by the heuristic
    # Known sizes say the first two fill a chunk of 500: the third starts the next one.
    assert _take(entries, 0, 500, counter, [250, 250, 250]) == (entries[:2], 2)
    assert _take(entries, 2, 500, counter, [250, 250, 250]) == (entries[2:], 3)
    # Without them each entry is counted: all three fit.
    assert _take(entries, 0, 500, counter) == (entries, 3)
    # One entry over the budget alone is cut to it; after others it starts the next chunk.
    (cut,), at = _take(entries, 0, 50, counter, [250, 250, 250])
    assert at == 1 and cut.startswith("a" * 100) and cut.endswith("window]") and len(cut) < 400
    assert _take(entries, 0, 300, counter, [250, 251, 250]) == (entries[:1], 1)


async def test_a_compression_sizes_its_summary_requests_without_recounting(
    local_ws: LocalWorkspace,
) -> None:
    # The requests still fit the summary model's window when sized from the tracker's counts.
    model = ScriptedModel(default=SUMMARY, context_window=4_000)
    comp = Compressor(
        ContextConfig(context_window=8_000),
        model=model,
        offloader=local_ws,
        session_id="s",
        counter=get_token_counter(exact=True),
    )
    msgs = [Msg(role="user", content=f"step {i}: " + "word " * 300) for i in range(40)]
    result = await comp.maybe_compress(msgs)
    assert result.compressed
    counter = get_token_counter(exact=True)
    assert len(model.calls) > 1
    for request in model.calls:
        assert counter.count_messages(request) < model.context_window
