"""Counting only what decides changes no decision: the same compressions, at the same steps,
with the same split, as counting every message exactly.

`Compressor.maybe_compress` counts the newest messages until they pass the trigger and
estimates the rest (`ContextTokenTracker.count_past`). Every corpus conversation is replayed
twice, as an agent lives it and as a history handed over whole, by that compressor and by one
whose every count is exact and whole (what it did before): each step must compress or not
alike, keep the same messages, write the same lines and send the same words.

The corpus is not everywhere (CI has none), and it holds only what its agents happened to do:
random sessions are replayed the same two ways too, with what the corpus lacks (a result
larger than the window, images, non-ASCII text, calls left unanswered, tiny windows).
"""

from __future__ import annotations

import asyncio
import base64
import random
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from corpus import conversations
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxoffload import (
    Base64Source,
    ContextConfig,
    DataBlock,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import CompressionResult, Compressor, is_context_note
from ctxoffload.tokens import TokenCount
from helpers import SUMMARY, corpus_cases, corpus_files, examples, tokenized_ids

CORPUS_CASES = corpus_cases(corpus_files())
T = TypeVar("T")


def compressor(workdir: Path, window: int, *, whole: bool) -> Compressor:
    comp = Compressor(
        ContextConfig(context_window=window),
        model=ScriptedModel(default=SUMMARY),
        offloader=LocalWorkspace(workdir, fsync=False),
        session_id="replay",
        counter=get_token_counter(exact=True),
    )
    if whole:
        tracker = comp.tracker

        def count_everything(
            system: Msg | None,
            summary: Msg | None,
            messages: Sequence[Msg],
            tools: Sequence[dict[str, Any]] = (),
            *,
            limit: float,
        ) -> TokenCount:
            return TokenCount.of(tracker.count(system, summary, messages, tools))

        tracker.count_past = count_everything  # type: ignore[method-assign]
    return comp


def kept(result: CompressionResult) -> list[str]:
    """The ids of the messages a step kept (the summary and notes aside: their ids are new)."""
    return [m.id for m in result.messages if not is_context_note(m)]


def said(result: CompressionResult) -> list[dict[str, Any]]:
    """What each message of a step says, to whom (ids aside: a note's is new each time)."""
    return [m.model_dump(mode="json", include={"role", "content"}) for m in result.messages]


def same(step: str, ours: CompressionResult, whole: CompressionResult) -> None:
    assert ours.compressed == whole.compressed, step
    assert ours.compressed_messages == whole.compressed_messages, step
    assert kept(ours) == kept(whole), step
    assert ours.line_span == whole.line_span, step
    assert ours.tokens_after == whole.tokens_after, step
    assert said(ours) == said(whole), step
    if ours.tokens_before_exact:
        assert ours.tokens_before == whole.tokens_before, step
    else:
        assert ours.tokens_before_bounds is not None, step
        low, high = ours.tokens_before_bounds
        assert low <= whole.tokens_before <= high, step


async def live(
    comp: Compressor, conversation: list[Msg]
) -> list[tuple[int, CompressionResult, bool]]:
    """Replay `conversation` through `comp` as an agent lives it: at each model call, the
    message's index, the step's result, and whether the step changed the context (a
    compaction, or the newest turn cut under the trigger)."""
    context: list[Msg] = []
    steps = []
    for index, msg in enumerate(conversation):
        if msg.role == "assistant" and context:
            result = await comp.maybe_compress(context)
            steps.append((index, result, result.compressed or result.messages != context))
            context = list(result.messages)  # (the result kept as it was, to compare)
        context.append(await comp.process_message(msg) if msg.role == "tool" else msg)
    return steps


async def in_turn(tmp: Path, window: int, job: Callable[[Compressor], Awaitable[T]]) -> tuple[T, T]:
    """`job` done by our compressor, then by the reference, each in a workspace at the same
    folder (the first moved aside before the second starts). The notes name that folder, and
    two folders' names can tokenize differently: `.../ours/` against `.../whole/` once tipped
    which of its two forms the artifact index took, which no count decides."""
    workdir = tmp / "workspace"
    ours = await job(compressor(workdir, window, whole=False))
    if workdir.exists():  # (a step that wrote nothing made no folder)
        workdir.rename(tmp / "ours")
    return ours, await job(compressor(workdir, window, whole=True))


async def lockstep(conversation: list[Msg], window: int, tmp: Path) -> int:
    """Replay `conversation` as an agent lives it through both compressors, step by step
    alike; the steps that changed the context."""
    mine, theirs = await in_turn(tmp, window, lambda comp: live(comp, conversation))
    for (step, ours, _), (_, whole, _) in zip(mine, theirs, strict=True):
        same(f"step {step}", ours, whole)
    return sum(changed for _, _, changed in mine)


@pytest.mark.parametrize("window", [6_000, 32_000])
@pytest.mark.parametrize("path", CORPUS_CASES)
async def test_a_live_replay_compresses_at_the_same_steps_with_the_same_split(
    path: Path, window: int, tmp_path: Path
) -> None:
    counter = get_token_counter(exact=True)
    for index, conversation in enumerate(conversations(path)[:3]):
        compressions = await lockstep(conversation, window, tmp_path / str(index))
        if counter.count_messages(conversation) > window:
            assert compressions > 0, "nothing was compressed: the test proves nothing here"


@pytest.mark.parametrize("path", CORPUS_CASES)
async def test_a_history_given_whole_is_split_alike(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversation = conversations(path)[0]
    spied: dict[str, list[str]] = {}

    async def whole_history(comp: Compressor) -> CompressionResult:
        if not spied:  # ours, the first
            spied["ids"] = tokenized_ids(comp.counter, monkeypatch)
        return await comp.maybe_compress(conversation)

    mine, theirs = await in_turn(tmp_path, 6_000, whole_history)
    same("whole history", mine, theirs)
    tokenized = spied["ids"]
    if not mine.tokens_before_exact:
        # Counted only as far as decides: the oldest message that left was never tokenized.
        stay = {m.id for m in mine.messages}
        oldest = next(m for m in conversation if m.role != "system" and m.id not in stay)
        assert oldest.id not in tokenized
        assert len(set(tokenized) & {m.id for m in conversation}) < len(conversation)


# -- random sessions ---------------------------------------------------------------------

WORDS = ["error", "src/app/main.py:42", "def", "return", "None", "0x1f", "ok", "{", "PROJ-12"]
EXOTIC = ["é", "日本語", "🎉", "👩‍💻", "ß", "naïve", "\u2028", "ﬁ"]

text_spec = st.tuples(
    st.sampled_from([1, 5, 40, 300, 3_000, 20_000]),  # words: 20,000 is past every window
    st.integers(0, 2**32 - 1),  # seed
    st.booleans(),  # non-ASCII
)
step_spec = st.one_of(
    st.tuples(st.just("user"), text_spec),
    st.tuples(st.just("assistant"), text_spec),
    st.tuples(
        st.just("tools"),
        st.lists(st.tuples(text_spec, st.booleans()), min_size=1, max_size=3),  # with an image
        st.booleans(),  # the results answered (False: the session ends waiting for them)
    ),
)


def words(spec: tuple[int, int, bool]) -> str:
    n, seed, exotic = spec
    rng = random.Random(seed)
    pool = WORDS + EXOTIC if exotic else WORDS
    return " ".join(rng.choice(pool) + str(rng.randrange(1_000)) for _ in range(n))


def session(steps: list[Any]) -> list[Msg]:
    """The messages of `steps`: requests, replies, and tool turns (a call per result, the
    results after the calls; the last turn's results may not have come yet)."""
    msgs = [Msg(role="system", content="You are an agent.")]
    for index, step in enumerate(steps):
        if step[0] in ("user", "assistant"):
            msgs.append(Msg(role=step[0], content=f"{step[0]} {index}: " + words(step[1])))
            continue
        _, results, answered = step
        ids = [f"call_{index}_{k}" for k in range(len(results))]
        calls = [ToolCallBlock(id=i, name="bash", input={"cmd": f"run {i}"}) for i in ids]
        msgs.append(Msg(role="assistant", content=[TextBlock(text=f"turn {index}"), *calls]))
        if not answered and index == len(steps) - 1:
            break
        for call_id, (spec, image) in zip(ids, results, strict=True):
            output: Any = words(spec)
            if image:
                data = base64.b64encode(random.Random(spec[1]).randbytes(600)).decode()
                source = Base64Source(media_type="image/png", data=data)
                output = [TextBlock(text=output), DataBlock(source=source, name="shot.png")]
            result = ToolResultBlock(id=call_id, name="bash", output=output)
            msgs.append(Msg(role="tool", content=[result]))
    return msgs


@pytest.mark.slow
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    steps=st.lists(step_spec, min_size=1, max_size=24),
    window=st.sampled_from([2_000, 6_000, 30_000]),
)
def test_a_random_session_compresses_alike_live_and_whole(steps: list[Any], window: int) -> None:
    conversation = session(steps)

    async def scenario(tmp: Path) -> None:
        compressions = await lockstep(conversation, window, tmp / "live")
        event(f"compressions live: {min(compressions, 3)}{'+' if compressions > 3 else ''}")
        mine, theirs = await in_turn(
            tmp / "given", window, lambda comp: comp.maybe_compress(conversation)
        )
        same("whole history", mine, theirs)
        event(f"given whole: {'estimated' if not mine.tokens_before_exact else 'exact'}")

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))
