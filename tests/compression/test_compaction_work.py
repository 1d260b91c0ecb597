"""What a compaction does once, and no more than it needs: one window's worth of what leaves
goes to the summary model, each message is scanned for artifacts once, and what is read back
is checked by id on its own line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.compression import CompressionResult, Compressor
from helpers import SUMMARY, plausible_session

COUNTER = get_token_counter(exact=True)


def history(n: int) -> list[Msg]:
    """A system prompt, then n plausible messages naming files, commands and ids."""
    msgs = [Msg(role="system", content="You fix bugs.")]
    for i, msg in enumerate(plausible_session(n, words=40)):
        if msg.role == "user" and isinstance(msg.content, str):
            msg = msg.model_copy(update={"content": f"{msg.content} see /srv/app/m{i}.py E{i:04d}"})
        msgs.append(msg)
    return msgs


def events(workdir: Path, session: str) -> list[dict[str, Any]]:
    path = workdir / "sessions" / session / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def compressor(
    workdir: Path, window: int, *, offloader: LocalWorkspace | None = None, **config: Any
) -> Compressor:
    return Compressor(
        ContextConfig(context_window=window, **config),
        model=ScriptedModel(default=SUMMARY),
        offloader=offloader or LocalWorkspace(workdir, fsync=False),
        session_id="s",
        counter=get_token_counter(exact=True),
    )


# -- the summary model is sent one window's worth ---------------------------------------------


async def test_only_the_newest_window_of_what_leaves_goes_to_the_summary_model(
    tmp_path: Path,
) -> None:
    msgs = history(600)
    comp = compressor(tmp_path, 8_000, summary_input_tokens=3_000)
    result = await comp.maybe_compress(msgs)
    assert result.compressed and result.summary_source == "model"
    assert isinstance(comp.model, ScriptedModel)
    sent = "\n".join(m.text for call in comp.model.calls for m in call)
    # The newest messages that left are in the requests; the oldest are not, but the first
    # request carries the summary of them made without a model (the first request ever).
    stay = {k.id for k in result.messages}
    leaving = [m for m in msgs[1:] if m.id not in stay and len(m.text) > 40]
    newest, oldest = leaving[-1], leaving[1]
    assert newest.text[:40] in sent
    assert oldest.text[:40] not in sent
    first_request = "\n".join(m.text for m in comp.model.calls[0])
    assert "A summary of what came before these messages" in first_request
    assert "First request:" in first_request
    # The requests hold about the budget (each message's entry is sized before it is sent).
    compression = next(e for e in events(tmp_path, "s") if e["kind"] == "compression")
    report = compression["summary_input"]
    assert 0 < report["tokens"] <= 3_000
    assert report["sent"] + report["folded"] == compression["messages"]
    assert report["folded"] > report["sent"] > 0
    # And every message that left is stored, at its line.
    assert compression["recoverable"] == {
        "messages": compression["messages"],
        "verified": compression["messages"],
    }


async def test_in_an_agents_loop_everything_that_leaves_is_sent(tmp_path: Path) -> None:
    # Messages arriving one at a time: each compaction moves less than the window, and the
    # default budget (the window) sends all of it.
    comp = compressor(tmp_path, 6_000)
    context: list[Msg] = [Msg(role="system", content="You fix bugs.")]
    reports: list[dict[str, int]] = []
    for msg in history(200)[1:]:
        context.append(msg)
        result = await comp.maybe_compress(context)
        context = result.messages
    for event in events(tmp_path, "s"):
        if event["kind"] == "compression":
            reports.append(event["summary_input"])
    assert reports and all(r["folded"] == 0 for r in reports)


def test_a_tiny_input_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="summary_input_tokens 10 is below 1000"):
        ContextConfig(summary_input_tokens=10)


# -- each message is scanned for artifacts once --------------------------------------------------


def index_of(result: CompressionResult, workdir: Path) -> str:
    summary = next(m for m in result.messages if "<artifact_index>" in m.text)
    return summary.text[summary.text.index("<artifact_index>") :].replace(str(workdir), "WS")


async def test_a_compaction_of_messages_counted_before_gives_the_same_index(
    tmp_path: Path,
) -> None:
    msgs = history(400)
    cold = compressor(tmp_path / "cold", 8_000)
    warm = compressor(tmp_path / "warm", 8_000)
    warm.count(msgs)  # an agent's loop: each message counted, and scanned, before
    assert len(warm._services.scanned) == len(msgs)
    first, second = await cold.maybe_compress(msgs), await warm.maybe_compress(msgs)
    assert index_of(first, tmp_path / "cold") == index_of(second, tmp_path / "warm")
    listed = [
        next(e for e in events(tmp_path / name, "s") if e["kind"] == "artifacts")["artifacts"]
        for name in ("cold", "warm")
    ]
    assert listed[0] == listed[1] and len(listed[0]) > 100
    # What left is dropped at the next count; what stays is kept for the next compaction.
    warm.count(second.messages)
    assert len(warm._services.scanned) <= 2 * len(second.messages) + 64


async def test_counting_scans_only_the_messages_new_to_the_compressor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxoffload.compression._index import _artifacts

    scanned: list[str] = []
    scan = _artifacts.scan_messages

    def spy(messages: list[Msg]) -> Any:
        scanned.extend(m.id for m in messages)
        return scan(messages)

    monkeypatch.setattr(_artifacts, "scan_messages", spy)
    comp = compressor(tmp_path, 100_000)
    msgs = history(50)
    comp.count(msgs)
    assert sorted(scanned) == sorted(m.id for m in msgs)
    new = Msg(role="user", content="also /etc/app.conf")
    comp.count([*msgs, new])
    assert scanned[len(msgs) :] == [new.id]


async def test_an_agent_loop_never_scans_the_summary_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compaction counts its new context twice (the summary without its index, then with
    # it) and the loop counts it again at the next step: the summary, the longest message
    # counted then, is never scanned for artifacts (what it names is carried by the
    # compressor's own state), and the index still names what left.
    from ctxoffload.compression import is_summary_message
    from ctxoffload.compression._index import _artifacts

    scanned: list[Msg] = []
    scan = _artifacts.scan_messages

    def spy(messages: list[Msg]) -> Any:
        scanned.extend(messages)
        return scan(messages)

    monkeypatch.setattr(_artifacts, "scan_messages", spy)
    comp = compressor(tmp_path, 6_000)
    context = history(300)[:1]
    compactions = 0
    for msg in history(300)[1:]:
        context.append(msg)
        result = await comp.maybe_compress(context)
        if result.compressed:
            context = result.messages
            compactions += 1
    assert compactions >= 3
    assert scanned and not [m for m in scanned if is_summary_message(m)]
    listed = [e for e in events(tmp_path, "s") if e["kind"] == "artifacts"]
    assert len(listed) == compactions
    assert all(any(a["status"] == "index" for a in e["artifacts"]) for e in listed)


# -- the read-back --------------------------------------------------------------------------------


async def test_messages_already_in_the_log_are_read_back_at_their_lines(tmp_path: Path) -> None:
    # Some of what leaves was stored before (an agent resumed from an older state): the log
    # keeps them at their first lines, apart from the rest, and each is still found there.
    msgs = history(300)
    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.offload_context("s", msgs=msgs[5:40])
    comp = compressor(tmp_path, 8_000)
    result = await comp.maybe_compress(msgs)
    assert result.compressed
    compression = next(e for e in events(tmp_path, "s") if e["kind"] == "compression")
    assert compression["recoverable"]["verified"] == compression["messages"]
    rows = [
        json.loads(line)["id"]
        for line in (tmp_path / "sessions" / "s" / "context.jsonl").read_text().splitlines()
    ]
    assert rows[:35] == [m.id for m in msgs[5:40]]
    assert len(rows) == len(set(rows)) == compression["messages"]


class _Reads(LocalWorkspace):
    """A LocalWorkspace that notes how the compressor reads its logs back."""

    def __init__(self, workdir: Path, *, lines_work: bool = True) -> None:
        super().__init__(workdir, fsync=False)
        self.lines_work = lines_work
        self.whole: list[str] = []
        self.ranges: list[tuple[int, int]] = []

    async def read_reference(self, reference: str) -> bytes:
        self.whole.append(reference)
        return await super().read_reference(reference)

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        self.ranges.append((first, last))
        if not self.lines_work:
            return b""  # a line reader that misses: the compressor must not trust it alone
        return await super().read_lines(reference, first, last)


async def test_each_compaction_reads_back_only_the_lines_it_wrote(tmp_path: Path) -> None:
    # An agent's loop with many compactions: each reads back its own lines, never the whole
    # log, so a compaction late in a long session costs what an early one does.
    ws = _Reads(tmp_path)
    comp = compressor(tmp_path, 6_000, offloader=ws)
    msgs = history(400)
    context = msgs[:1]
    spans = []
    for msg in msgs[1:]:
        context.append(msg)
        result = await comp.maybe_compress(context)
        if result.compressed:
            context = result.messages
            spans.append(result.line_span)
    assert len(spans) >= 5
    assert ws.whole == []
    assert ws.ranges == spans
    compressions = [e for e in events(tmp_path, "s") if e["kind"] == "compression"]
    assert len(compressions) == len(spans)
    for compression in compressions:
        assert compression["recoverable"]["verified"] == compression["messages"] > 0


async def test_a_read_back_that_misses_its_lines_reads_the_whole_log(tmp_path: Path) -> None:
    # A line reader that gives back the wrong bytes (a custom one, a file changed under the
    # workspace's marks) does not make a stored message look lost: the log is read whole.
    ws = _Reads(tmp_path, lines_work=False)
    comp = compressor(tmp_path, 8_000, offloader=ws)
    result = await comp.maybe_compress(history(300))
    assert result.compressed
    assert len(ws.ranges) == 1 and len(ws.whole) == 1
    compression = next(e for e in events(tmp_path, "s") if e["kind"] == "compression")
    assert compression["recoverable"]["verified"] == compression["messages"] > 0
