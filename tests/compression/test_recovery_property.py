"""The key invariant, checked on random sessions: nothing that leaves the context is lost.

An agent-like loop appends user requests, replies and tool turns, passes every tool result
through `Compressor.process_tool_result` and calls `maybe_compress` before each model call.
At the end, starting only from paths visible in the final context (the summary's
context.jsonl and line span, truncation markers, the artifact trail) and following the paths
found in what they lead to, every original message and tool result must be recovered byte
for byte.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from ctxoffload import (
    Base64Source,
    ContextConfig,
    DataBlock,
    InvalidReference,
    LocalWorkspace,
    ModelError,
    Msg,
    ScriptedModel,
    Summary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import (
    TRUNCATION_MARKER,
    CompressionResult,
    Compressor,
    is_summary_message,
)
from ctxoffload.tokens import MESSAGE_OVERHEAD_TOKENS
from helpers import examples

VOCAB = ["error", "file", "def", "return", "src/app.py:42", "None", "0x1f", "ok", "{", "}"]
EXOTIC = ["é", "日本語", "🎉", "👩‍💻", "ß", "Ω", "\t", "naïve", "ﬁ", "😀😀"]
TOOLS = ["bash", "grep", "read_file", "browser"]

# --- generating sessions ---------------------------------------------------------------

text_spec = st.tuples(
    st.integers(1, 500),  # words
    st.integers(0, 2**32 - 1),  # seed
    st.booleans(),  # non-ASCII
)
result_spec = st.tuples(
    st.integers(0, 400),  # lines
    st.integers(1, 15),  # words per line
    st.integers(0, 2**32 - 1),  # seed
    st.integers(0, 2),  # images
    st.booleans(),  # non-ASCII
    st.booleans(),  # is_error
)
step_spec = st.one_of(
    st.tuples(st.just("user"), text_spec, st.booleans()),  # with an image
    st.tuples(st.just("assistant"), text_spec),
    st.tuples(
        st.just("tools"),
        st.lists(result_spec, min_size=1, max_size=4),
        st.booleans(),  # results in one message or one message each
        st.booleans(),  # compress while the calls are unanswered
        st.booleans(),  # provider-style ids with characters unsafe in file names
    ),
)


def words(n: int, seed: int, exotic: bool) -> str:
    rng = random.Random(seed)
    pool = VOCAB + EXOTIC if exotic else VOCAB
    return " ".join(rng.choice(pool) + str(rng.randrange(100)) for _ in range(n))


def png(seed: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(1 + seed % 200)


def image_block(raw: bytes, name: str) -> DataBlock:
    encoded = base64.b64encode(raw).decode()
    return DataBlock(source=Base64Source(media_type="image/png", data=encoded), name=name)


def tool_result(call_id: str, name: str, spec: tuple[Any, ...]) -> ToolResultBlock:
    lines, per_line, seed, images, exotic, is_error = spec
    text = "\n".join(words(per_line, seed + i, exotic) for i in range(lines))
    if not images:
        return ToolResultBlock(id=call_id, name=name, output=text, is_error=is_error)
    parts: list[TextBlock | DataBlock] = [TextBlock(text=text)]
    for k in range(images):
        parts.append(image_block(png(seed + k), f"shot{k}.png"))
        parts.append(TextBlock(text=f"caption {k}"))
    return ToolResultBlock(id=call_id, name=name, output=parts, is_error=is_error)


# --- the agent-like loop ---------------------------------------------------------------


def summary_reply(messages: Sequence[Msg]) -> dict[str, str]:
    n = messages[-1].text.count("\n<")
    return {name: f"{name}: {n} entries summarised" for name in Summary.model_fields}


@dataclass
class Run:
    ws: LocalWorkspace
    comp: Compressor
    context: list[Msg]
    appended: list[Msg] = field(default_factory=list)  # every message as it entered the context
    results: list[tuple[ToolResultBlock, ToolResultBlock]] = field(default_factory=list)
    compressions: int = 0

    async def compress(self) -> CompressionResult:
        result = await self.comp.maybe_compress(self.context)
        check_tokens_after(self.comp, result)
        check_turns_whole(result.messages)
        self.compressions += result.compressed
        self.context = result.messages
        return result

    def append(self, msg: Msg) -> None:
        self.appended.append(msg)
        self.context.append(msg)


def check_turns_whole(context: list[Msg]) -> None:
    """A tool call and its results are in the context together, or neither is."""
    calls = {c.id for m in context for c in m.tool_calls}
    answered = {r.id for m in context for r in m.tool_results}
    assert answered <= calls
    unanswered = calls - answered
    # Only the newest message may wait for results (the agent is running its tools).
    assert not unanswered or unanswered <= {c.id for c in context[-1].tool_calls}


def check_tokens_after(comp: Compressor, result: CompressionResult) -> None:
    """(b) After a compression the context is under the trigger, whenever it can be.

    Precondition, stated: the messages that must stay verbatim (system prompt, the pinned
    request, the kept turns) plus the summary's budget are under the trigger. The compressor
    shrinks the summary's text to max(reserve, 500) tokens; as a message it adds its
    overhead.
    """
    if not result.compressed:
        return
    window = comp.window()
    trigger = comp.config.trigger_ratio * window
    verbatim = [m for m in result.messages if not is_summary_message(m)]
    summary_budget = max(comp.config.reserve_tokens(window), 500) + MESSAGE_OVERHEAD_TOKENS
    met = comp.count(verbatim) + summary_budget < trigger
    if met:
        assert result.tokens_after < trigger, (result.tokens_after, trigger)
    if currently_in_test_context():
        event(f"a compression with the kept part {'under' if met else 'over'} its budget")
    assert result.tokens_after == comp.count(result.messages)


async def play(
    workdir: Path,
    steps: list[Any],
    window: int,
    limit: int,
    fails: bool,
    ratios: tuple[float, float] = (0.8, 0.1),
) -> Run:
    ws = LocalWorkspace(workdir, fsync=False)
    model = ScriptedModel(default=ModelError("summary model down") if fails else summary_reply)
    trigger, reserve = ratios
    config = ContextConfig(
        context_window=window, tool_result_limit=limit, trigger_ratio=trigger, reserve_ratio=reserve
    )
    comp = Compressor(
        config,
        model=model,
        offloader=ws,
        session_id="prop",
        counter=get_token_counter(exact=False),
    )
    run = Run(ws, comp, [Msg(role="system", content="You are an agent. " + words(30, 1, True))])
    for index, step in enumerate(steps):
        kind = step[0]
        if kind == "user":
            _, (n, seed, exotic), with_image = step
            text = f"request {index}: " + words(n, seed, exotic)
            content: Any = text
            if with_image:
                content = [TextBlock(text=text), image_block(png(seed), "upload.png")]
            run.append(Msg(role="user", content=content))
        elif kind == "assistant":
            _, (n, seed, exotic) = step
            run.append(Msg(role="assistant", content=f"reply {index}: " + words(n, seed, exotic)))
        else:
            _, specs, together, mid_call, odd_ids = step
            ids = [
                f"toolu_{index}/{j}:x" if odd_ids else f"call_{index}_{j}"
                for j in range(len(specs))
            ]
            names = [TOOLS[(index + j) % len(TOOLS)] for j in range(len(specs))]
            call = Msg(
                role="assistant",
                content=[
                    ToolCallBlock(id=i, name=n, input={"step": index})
                    for i, n in zip(ids, names, strict=True)
                ],
            )
            run.append(call)
            if mid_call:
                await run.compress()
                assert any(m is call for m in run.context)  # the unfinished call stays
            processed = []
            for call_id, name, spec in zip(ids, names, specs, strict=True):
                original = tool_result(call_id, name, spec)
                block = await comp.process_tool_result(original)
                run.results.append((original, block))
                processed.append(block)
            if together:
                run.append(Msg(role="tool", content=processed))
            else:
                for block in processed:
                    run.append(Msg(role="tool", content=[block]))
        await run.compress()
    return run


# --- recovering from the final context -------------------------------------------------


@dataclass
class Recovered:
    files: dict[str, bytes]  # every path reached, with its bytes
    rows: dict[str, Any]  # context.jsonl rows in the named spans, by message id
    ws: Any = None


def visible_text(msg: Msg) -> str:
    """What the model sees of a message: its content (not its metadata)."""
    return json.dumps(msg.model_dump(mode="json")["content"])


def spans_named(text: str) -> list[tuple[int, int]]:
    found = re.search(r"context\.jsonl \(lines ([0-9, -]+)\)", text)
    if not found:
        return []
    spans = []
    for part in found.group(1).split(", "):
        first, _, last = part.partition("-")
        spans.append((int(first), int(last or first)))
    return spans


async def recover(ws: LocalWorkspace, context: list[Msg]) -> Recovered:
    path_re = re.compile(re.escape(str(ws.workdir)) + r"/[\w./-]+")
    texts = [visible_text(m) for m in context]
    spans = [s for t in texts for s in spans_named(t)]
    pending = {p.rstrip(".") for t in texts for p in path_re.findall(t)}
    out = Recovered({}, {}, ws)
    cut: set[str] = set()
    while pending:
        path = pending.pop()
        if path in out.files or path in cut:
            continue
        try:
            data = await ws.read_reference(path)
        except InvalidReference:
            cut.add(path)
            continue
        out.files[path] = data
        found: list[str] = []
        if path.endswith("context.jsonl"):
            lines = data.split(b"\n")
            for first, last in spans:
                for line in lines[first - 1 : last]:
                    row = json.loads(line)
                    out.rows[row["id"]] = row
                    found += path_re.findall(json.dumps(row["content"]))
        elif path.endswith(".txt"):
            found = path_re.findall(data.decode("utf-8", "replace"))
        pending |= {p.rstrip(".") for p in found} - out.files.keys()
    # Every path the agent is shown resolves, except where a summary field was shortened to
    # fit its budget in the middle of one (the artifact trail still names it whole).
    for path in cut:
        assert any(f.startswith(path) for f in out.files), f"{path} names no file"
    return out


def same_content(original: Any, stored: Any, got: Recovered) -> bool:
    """Equal, except that a base64 payload may have become a reference to its bytes."""
    if original == stored:
        return True
    if isinstance(original, dict) and original.get("type") == "base64":
        url = stored.get("url") if isinstance(stored, dict) else None
        return (
            stored.get("type") == "url"
            and url in got.files
            and got.files[url] == base64.b64decode(original["data"])
            and stored.get("media_type") == original.get("media_type")
        )
    if isinstance(original, dict):
        return (
            isinstance(stored, dict)
            and original.keys() == stored.keys()
            and all(same_content(original[k], stored[k], got) for k in original)
        )
    if isinstance(original, list):
        return (
            isinstance(stored, list)
            and len(original) == len(stored)
            and all(same_content(a, b, got) for a, b in zip(original, stored, strict=True))
        )
    return bool(original == stored)


def marker_path(text: str, got: Recovered) -> str:
    notice = text.rpartition("\n" + TRUNCATION_MARKER + "\n")[2]
    paths = [p for p in got.files if p in notice and "/tool_result-" in p]
    assert len(paths) == 1, notice
    return paths[0]


def check_message(msg: Msg, context: list[Msg], got: Recovered) -> None:
    original = msg.model_dump(mode="json")["content"]
    live = next((m for m in context if m.id == msg.id), None)
    if live is not None:
        version: Any = live.model_dump(mode="json")["content"]
    else:
        assert msg.id in got.rows, f"{msg.role} message {msg.id} is lost"
        version = got.rows[msg.id]["content"]
    if same_content(original, version, got):
        return
    if msg.role == "tool":
        # A fresh result in a newest turn over the reserve is cut harder, from its own file.
        for block, shown in zip(msg.tool_results, version, strict=True):
            if same_content(block.model_dump(mode="json"), shown, got):
                continue
            output = shown["output"]
            assert isinstance(output, str) and TRUNCATION_MARKER in output
            if isinstance(block.output, str) and TRUNCATION_MARKER in block.output:
                # Truncated on arrival: cut again from the same file (checked in run.results).
                assert marker_path(output, got) == marker_path(block.output, got)
            else:
                assert got.files[marker_path(output, got)] == expected_file(block, got.ws, got)
        return
    # A request bigger than the reserve, or the text of a fresh message in a newest turn over
    # the reserve, was cut; its whole text is in the file it names.
    assert msg.role in ("user", "assistant"), f"{msg.role} message {msg.id} changed"
    cut = version if isinstance(version, str) else version[0]["text"]
    assert TRUNCATION_MARKER in cut
    assert got.files[marker_path(cut, got)] == msg.text.encode()
    if isinstance(original, list):
        assert same_content(original[1:], version[1:], got)


def expected_file(block: ToolResultBlock, ws: LocalWorkspace, got: Recovered) -> bytes:
    """The tool_result file DESIGN.md section 3 describes, built independently."""
    if isinstance(block.output, str):
        return block.output.encode()
    lines = []
    for part in block.output:
        if isinstance(part, TextBlock):
            lines.append(part.text)
            continue
        assert isinstance(part.source, Base64Source)
        raw = base64.b64decode(part.source.data)
        url = str(ws.data_dir / f"{hashlib.sha256(raw).hexdigest()}.png")
        assert got.files[url] == raw  # the image is reachable and intact
        lines.append(f"<data url='{url}' name='{part.name}' media_type='image/png'/>")
    return "\n".join(lines).encode()


async def check_recoverable(run: Run) -> None:
    got = await recover(run.ws, run.context)
    for msg in run.appended:
        check_message(msg, run.context, got)
    for original, shown in run.results:
        if shown is original:
            continue  # small enough: it travels inside its message, checked above
        assert isinstance(shown.output, str) and TRUNCATION_MARKER in shown.output
        path = marker_path(shown.output, got)
        assert got.files[path] == expected_file(original, run.ws, got)
    # The context starts with the system prompt, then at most one summary.
    assert run.context[0].role == "system"
    assert sum(is_summary_message(m) for m in run.context) == (1 if run.compressions else 0)


@pytest.mark.slow
@settings(
    max_examples=examples(45),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    steps=st.lists(step_spec, min_size=6, max_size=40),
    window=st.integers(3000, 6000),
    limit=st.integers(200, 400),
    fails=st.booleans(),
    ratios=st.sampled_from([(0.8, 0.1), (0.6, 0.3), (0.9, 0.05)]),
)
def test_everything_that_leaves_the_context_is_recoverable_from_it(
    steps: list[Any], window: int, limit: int, fails: bool, ratios: tuple[float, float]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:

        async def scenario() -> None:
            run = await play(Path(tmp) / "ws", steps, window, limit, fails, ratios)
            await check_recoverable(run)
            event(f"compressions: {min(run.compressions, 3)}{'+' if run.compressions > 3 else ''}")
            event(f"truncated results: {sum(a is not b for a, b in run.results) > 0}")

        asyncio.run(scenario())


@pytest.mark.slow
def test_a_long_session_compresses_several_times_and_loses_nothing() -> None:
    """A fixed long session, so the invariant is checked on many compressions every run."""
    rng = random.Random(7)
    steps: list[Any] = []
    for i in range(120):
        if i % 10 == 0:
            steps.append(("user", (rng.randrange(5, 700), i, i % 3 == 0), i % 20 == 0))
        elif i % 3 == 0:
            steps.append(("assistant", (rng.randrange(5, 200), i, True)))
        else:
            specs = [
                (rng.randrange(0, 300), rng.randrange(1, 12), i * 10 + j, j % 2, True, False)
                for j in range(rng.randrange(1, 4))
            ]
            steps.append(("tools", specs, i % 2 == 0, i % 7 == 0, i % 5 == 0))
    with tempfile.TemporaryDirectory() as tmp:

        async def scenario() -> None:
            run = await play(Path(tmp) / "ws", steps, 4000, 300, fails=False)
            assert run.compressions >= 5
            await check_recoverable(run)

        asyncio.run(scenario())
