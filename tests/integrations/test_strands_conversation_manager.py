"""`OffloadingConversationManager` inside a real Strands `Agent`, driven by a scripted model.

Run by `.ci/run` in an environment with `ctxoffload[strands]`; skipped elsewhere.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("strands", "strands")

from strands import Agent, tool  # noqa: E402
from strands.types.exceptions import ContextWindowOverflowException  # noqa: E402
from strands_scripted import ScriptedModelBase  # noqa: E402

from ctxoffload import LocalWorkspace  # noqa: E402
from ctxoffload.exceptions import ConfigError  # noqa: E402
from ctxoffload.integrations.strands import OffloadingConversationManager  # noqa: E402
from helpers import MinimalOffloader  # noqa: E402


class SlowModel(ScriptedModelBase):
    """Calls `slow` once, then answers "done"."""

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if any("toolResult" in b for m in messages for b in m["content"]):
            events: list[dict[str, Any]] = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"text": "done"}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        else:
            use = {"toolUse": {"toolUseId": "s0", "name": "slow"}}
            events = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockStart": {"start": use}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"page": 0}'}}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "tool_use"}},
            ]
        for event in events:
            yield event


@tool
def fetch(page: int) -> str:
    """Fetch one page of the report."""
    return "\n".join(f"page {page} row {i}" for i in range(30)) + f"\nEND-{page}"


class PlanModel(ScriptedModelBase):
    """Calls `fetch` for pages 0..n-1, then answers; optionally overflows once first."""

    def __init__(self, pages: int, overflow_at: int | None = None) -> None:
        self.pages = pages
        self.overflow_at = overflow_at
        self.requests: list[list[dict[str, Any]]] = []
        self.calls = 0

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if self.overflow_at is not None and self.calls == self.overflow_at:
            self.overflow_at = None
            raise ContextWindowOverflowException("input is too long for the model")
        self.requests.append(json.loads(json.dumps(messages, default=repr)))
        done = sum(1 for m in messages for b in m["content"] if "toolResult" in b) + self._dropped(
            messages
        )
        if done < self.pages:
            events = [
                {"messageStart": {"role": "assistant"}},
                {
                    "contentBlockStart": {
                        "start": {"toolUse": {"toolUseId": f"t{done}", "name": "fetch"}}
                    }
                },
                {
                    "contentBlockDelta": {
                        "delta": {"toolUse": {"input": json.dumps({"page": done})}}
                    }
                },
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "tool_use"}},
            ]
        else:
            events = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"text": "all pages read"}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        for event in events:
            yield event

    @staticmethod
    def _dropped(messages: Any) -> int:
        # Pages whose results left the history: the highest page number named anywhere + 1
        # minus those still present, read from the toolUse ids the history still holds.
        seen = [
            int(b["toolUse"]["toolUseId"][1:])
            for m in messages
            for b in m["content"]
            if "toolUse" in b
        ]
        results = sum(1 for m in messages for b in m["content"] if "toolResult" in b)
        return (max(seen) + 1 - results) if seen else 0


def texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages)


def test_a_sliding_window_persists_what_it_drops_and_names_the_file(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="run-1", window_size=6, per_turn=True, summary_model=False
    )
    model = PlanModel(pages=8)
    agent = Agent(model=model, tools=[fetch], conversation_manager=manager, callback_handler=None)
    assert str(agent("read every page")).strip() == "all pages read"

    log = tmp_path / "ws/sessions/run-1/context.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows, "nothing was offloaded"
    last = model.requests[-1]
    assert str(log) in texts(last)  # the note names the file
    assert last[0]["role"] == "user"  # Bedrock's rule: the history starts with a user turn
    roles = [m["role"] for m in last]
    assert all(a != b for a, b in itertools.pairwise(roles))  # turns alternate
    # Every page's result is either still in the history or in context.jsonl, whole.
    stored = texts(rows)
    for page in range(8):
        assert f"END-{page}" in stored or f"END-{page}" in texts(agent.messages)
    assert manager.removed_message_count > 0


def test_an_overflow_reduces_and_retries(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="run-2", window_size=4, summary_model=False
    )
    model = PlanModel(pages=5, overflow_at=6)
    agent = Agent(model=model, tools=[fetch], conversation_manager=manager, callback_handler=None)
    assert str(agent("read every page")).strip() == "all pages read"
    assert (tmp_path / "ws/sessions/run-2/context.jsonl").is_file()


def test_summarization_writes_the_summary_and_keeps_the_newest(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws,
        session_id="run-3",
        strategy="summarization",
        summary_ratio=0.5,
        preserve_recent_messages=2,
        per_turn=2,
        summary_model=False,
    )
    model = PlanModel(pages=6)
    agent = Agent(model=model, tools=[fetch], conversation_manager=manager, callback_handler=None)
    assert str(agent("read every page")).strip() == "all pages read"
    log = tmp_path / "ws/sessions/run-3/context.jsonl"
    assert log.is_file()
    assert any("<context_summary>" in texts(r) and str(log) in texts(r) for r in model.requests)


def test_a_workspace_that_cannot_store_removes_nothing(tmp_path: Path) -> None:
    manager = OffloadingConversationManager(
        LocalWorkspace(tmp_path / "ws"),
        session_id="run-4",
        window_size=2,
        per_turn=True,
        summary_model=False,
    )
    # The workspace breaks after the manager was built (a folder that is a file then is
    # refused at construction: tests/integrations/test_contract.py).
    (tmp_path / "ws").write_text("a file where the workspace should be")
    model = PlanModel(pages=3)
    agent = Agent(model=model, tools=[fetch], conversation_manager=manager, callback_handler=None)
    assert str(agent("read every page")).strip() == "all pages read"
    assert all(f"END-{p}" in texts(model.requests[-1]) for p in range(3))


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    with pytest.raises(ValueError, match="strategy"):
        OffloadingConversationManager(ws, strategy="window", summary_model=False)
    with pytest.raises(ValueError, match="per_turn"):
        OffloadingConversationManager(ws, per_turn=0, summary_model=False)
    with pytest.raises(ValueError, match="session_id"):
        OffloadingConversationManager(ws, session_id="../x", summary_model=False)


def test_anything_but_an_offloader_is_refused_naming_what_it_lacks() -> None:
    with pytest.raises(ConfigError, match="object has no offload_context, offload_tool_result"):
        OffloadingConversationManager(object(), summary_model=False)  # type: ignore[arg-type]


def test_a_custom_offloader_with_the_three_methods_gets_what_is_dropped() -> None:
    custom = MinimalOffloader()
    manager = OffloadingConversationManager(
        custom, session_id="run-6", window_size=2, summary_model=False
    )
    agent = Agent(
        model=PlanModel(pages=3), tools=[fetch], conversation_manager=manager, callback_handler=None
    )
    assert str(agent("read every page")).strip() == "all pages read"
    assert custom.contexts and all(session == "run-6" for session, _ in custom.contexts)


def test_the_managers_loop_thread_ends_with_the_manager(tmp_path: Path) -> None:
    import gc
    import threading

    def loop_threads() -> set[threading.Thread]:
        names = ("ctxoffload-strands", "ctxoffload-strands-runs")  # its runs' leases too
        return {t for t in threading.enumerate() if t.name in names}

    before = loop_threads()
    manager = OffloadingConversationManager(
        LocalWorkspace(tmp_path / "ws"), session_id="run-5", window_size=2, summary_model=False
    )
    agent = Agent(
        model=PlanModel(pages=3), tools=[fetch], conversation_manager=manager, callback_handler=None
    )
    agent("read every page")
    mine = loop_threads() - before
    assert len(mine) == 2
    del agent, manager
    gc.collect()
    for thread in mine:
        thread.join(timeout=5)
        assert not thread.is_alive()


class CompactingModel(ScriptedModelBase):
    """Fetches pages 0..n-1, then calls compact_context twice at once, then answers."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.step = 0

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.step += 1
        uses: list[tuple[str, str, dict[str, Any]]] = []
        if self.step <= self.pages:
            uses = [(f"t{self.step}", "fetch", {"page": self.step})]
        elif self.step == self.pages + 1:
            uses = [
                ("k1", "compact_context", {"instructions": "keep the END markers"}),
                ("k2", "compact_context", {}),
            ]
        events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
        for use_id, name, args in uses:
            events += [
                {"contentBlockStart": {"start": {"toolUse": {"toolUseId": use_id, "name": name}}}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}},
                {"contentBlockStop": {}},
            ]
        if uses:
            events.append({"messageStop": {"stopReason": "tool_use"}})
        else:
            events += [
                {"contentBlockDelta": {"delta": {"text": "compacted and done"}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        for event in events:
            yield event


def test_the_compact_tool_compacts_once_per_step_and_says_where(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="run-c", strategy="summarization", summary_ratio=0.5, summary_model=False
    )
    agent = Agent(
        model=CompactingModel(pages=6),
        tools=[fetch, manager.compact_tool()],
        conversation_manager=manager,
        callback_handler=None,
    )
    assert str(agent("read every page, then compact")).strip() == "compacted and done"
    answers = {
        b["toolResult"]["toolUseId"]: texts(b["toolResult"]["content"])
        for m in agent.messages
        for b in m["content"]
        if "toolResult" in b
    }
    # Strands runs the tool calls of one step concurrently: either may come first. One
    # compacts and says where; the other is told it already happened.
    done, refused = sorted((answers["k1"], answers["k2"]), key=lambda a: "already" in a)
    assert "Compacted:" in done and "context.jsonl" in done
    assert "already compacted" in refused
    assert (tmp_path / "ws/sessions/run-c/context.jsonl").is_file()


def test_the_manager_is_the_sessions_one_live_writer_and_signs_its_events(
    tmp_path: Path,
) -> None:
    """The manager holds its session's lease for each invocation: a second agent's run of the
    same session while the first is live is refused, naming the first and what to do; once
    the first ends, the next run is welcome; every event the first wrote names its agent."""
    import threading

    from ctxoffload import SessionBusyError

    gate, entered = threading.Event(), threading.Event()

    @tool
    def slow(page: int) -> str:
        """Fetch one page, slowly."""
        entered.set()
        gate.wait(60)
        return f"page {page}"

    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="run-l", window_size=6, per_turn=True, summary_model=False
    )
    agent = Agent(
        name="reader",
        model=SlowModel(),
        tools=[slow],
        conversation_manager=manager,
        callback_handler=None,
    )
    answers: list[str] = []
    first = threading.Thread(target=lambda: answers.append(str(agent("read a page"))))
    first.start()
    try:
        assert entered.wait(60), "the first run never reached its tool"
        other = OffloadingConversationManager(
            ws, session_id="run-l", window_size=6, summary_model=False
        )
        intruder = Agent(
            name="intruder",
            model=PlanModel(pages=2),
            tools=[fetch],
            conversation_manager=other,
            callback_handler=None,
        )
        with pytest.raises(SessionBusyError, match="agent 'reader'") as refused:
            intruder("read every page")
        assert "give this manager another session_id" in str(refused.value)
        assert "if_busy" not in str(refused.value)
    finally:
        gate.set()
        first.join(60)
    assert answers and answers[0].strip() == "done"
    events = [
        json.loads(x)
        for x in (tmp_path / "ws/sessions/run-l/events.jsonl").read_text().splitlines()
    ]
    assert events and {e["writer"]["agent"] for e in events} == {"reader"}
    assert {e["writer"]["session"] for e in events} == {"run-l"}
    # The first run ended: its lease went with it, and the intruder's next run is welcome.
    assert str(intruder("read every page")).strip() == "all pages read"


def test_a_manager_serves_the_session_of_one_agent_only(tmp_path: Path) -> None:
    """A manager bound to one Strands session refuses an agent of another one (it would write
    that conversation into the first's session), naming both; the first agent goes on."""
    from strands.session.file_session_manager import FileSessionManager

    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(ws, window_size=6, per_turn=True, summary_model=False)

    def agent_of(session: str) -> Agent:
        return Agent(
            model=PlanModel(pages=1),
            tools=[fetch],
            conversation_manager=manager,
            session_manager=FileSessionManager(session, storage_dir=str(tmp_path / "strands")),
            callback_handler=None,
        )

    first = agent_of("alice")
    assert str(first("read every page")).strip() == "all pages read"
    assert manager.session_id == "alice"
    with pytest.raises(ConfigError, match=r"session 'alice'.*'bob' needs a manager of its own"):
        agent_of("bob")("read every page")
    assert not (tmp_path / "ws" / "sessions" / "bob").exists()


class OnePagePerQuestion(ScriptedModelBase):
    """Each invocation: fetch one page, then answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if any("toolResult" in b for b in messages[-1]["content"]):
            events: list[dict[str, Any]] = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"text": "read"}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        else:
            use = {"toolUse": {"toolUseId": f"q{self.calls}", "name": "fetch"}}
            events = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockStart": {"start": use}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"page": 1}'}}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "tool_use"}},
            ]
        for event in events:
            yield event


def test_a_long_lived_agent_keeps_a_bounded_number_of_notes(tmp_path: Path) -> None:
    """Each compaction writes a note (a summary or the window's note); the manager knew every
    note it had ever written by its text, forever: 598 after 300 questions, one of them still
    in the agent's messages. It keeps the latest 64."""
    manager = OffloadingConversationManager(
        LocalWorkspace(tmp_path / "ws", fsync=False),
        session_id="s",
        window_size=2,
        summary_ratio=0.5,
        preserve_recent_messages=2,
        per_turn=True,
        summary_model=False,
    )
    agent = Agent(
        model=OnePagePerQuestion(),
        tools=[fetch],
        conversation_manager=manager,
        callback_handler=None,
    )
    for question in range(80):
        agent(f"question {question}")
    notes = manager._bridge._notes
    assert 1 <= len(notes) <= 64
    said = texts(agent.messages)
    assert any(json.dumps(note)[1:-1] in said for note in notes)


class SizeLimitedModel(ScriptedModelBase):
    """Refuses a request over `limit` characters as Strands' models do (an overflow); each
    question otherwise: one call of `report`, then an answer."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sent: list[int] = []
        self.refused = 0

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        size = len(json.dumps(messages, default=repr))
        if size > self.limit:
            self.refused += 1
            raise ContextWindowOverflowException(f"{size} characters, over {self.limit}")
        self.sent.append(size)
        if any("toolResult" in b for b in messages[-1]["content"]):
            events: list[dict[str, Any]] = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"text": "read"}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        else:
            use = {"toolUse": {"toolUseId": f"r{len(self.sent)}", "name": "report"}}
            events = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockStart": {"start": use}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "tool_use"}},
            ]
        for event in events:
            yield event


def report_of(rows: int) -> Any:
    @tool
    def report() -> str:
        """Read the report."""
        return "\n".join(f"row {i} " + "x" * 40 for i in range(rows)) + "\nEND-OF-REPORT"

    return report


@pytest.mark.parametrize("strategy", ["sliding_window", "summarization"])
def test_an_overflow_below_the_window_size_moves_the_oldest_turns_out(
    tmp_path: Path, strategy: str
) -> None:
    """An overflow with fewer messages than `window_size` (or `preserve_recent_messages`):
    the manager removed nothing and re-raised, ending the run, where Strands' own sliding
    window trims. The oldest turns go to context.jsonl first, and every question is answered."""
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="s", strategy=strategy, summary_model=False
    )
    model = SizeLimitedModel(limit=20_000)
    agent = Agent(
        model=model, tools=[report_of(160)], conversation_manager=manager, callback_handler=None
    )
    for question in range(6):
        assert str(agent(f"question {question}")).strip() == "read"
    assert model.refused > 0
    assert len(agent.messages) < 24  # below window_size 40: turns were moved out anyway
    stored = (tmp_path / "ws/sessions/s/context.jsonl").read_text()
    assert "question 0" in stored
    assert all(m["content"] != [{"text": "question 0"}] for m in agent.messages)
    assert "context.jsonl" in texts(agent.messages)  # the note (or summary) names the file


@pytest.mark.parametrize("strategy", ["sliding_window", "summarization"])
def test_an_overflow_from_one_tool_result_stores_it_whole_and_cuts_it(
    tmp_path: Path, strategy: str
) -> None:
    """One tool result over the model's window: nothing cut it and the run ended with the
    overflow. It is stored whole in the workspace, the history keeps its head and a notice
    naming the file, and the retried request fits."""
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="s", strategy=strategy, summary_model=False
    )
    model = SizeLimitedModel(limit=20_000)
    agent = Agent(
        model=model, tools=[report_of(1_200)], conversation_manager=manager, callback_handler=None
    )
    assert str(agent("read the report")).strip() == "read"
    assert model.refused > 0 and model.sent[-1] <= 20_000
    history = texts(agent.messages)
    assert "row 0 " in history and "END-OF-REPORT" not in history
    stored = [p for p in (tmp_path / "ws/sessions/s").iterdir() if p.name.startswith("tool_result")]
    assert len(stored) == 1 and stored[0].read_text().endswith("END-OF-REPORT")
    assert stored[0].name in history  # the notice names the file


def test_one_manager_refuses_a_second_agent_while_the_first_runs(tmp_path: Path) -> None:
    """Two agents given one manager, run at once on two threads: the second reused the
    lease the first held, so both wrote the session at once (and the first one's end let
    the lease go under the second). The second is refused, in Strands' terms; the first
    goes on, and once it ended the second is welcome."""
    import threading

    from ctxoffload import SessionBusyError

    gate, entered = threading.Event(), threading.Event()

    @tool
    def slow(page: int) -> str:
        """Fetch one page, slowly."""
        entered.set()
        gate.wait(60)
        return f"page {page}"

    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws, session_id="shared", window_size=6, summary_model=False
    )
    first = Agent(
        name="first",
        model=SlowModel(),
        tools=[slow],
        conversation_manager=manager,
        callback_handler=None,
    )
    second = Agent(
        name="second",
        model=PlanModel(pages=1),
        tools=[fetch],
        conversation_manager=manager,
        callback_handler=None,
    )
    answers: list[str] = []
    running = threading.Thread(target=lambda: answers.append(str(first("read a page"))))
    running.start()
    try:
        assert entered.wait(60), "the first run never reached its tool"
        with pytest.raises(SessionBusyError, match="agent 'first'") as refused:
            second("read every page")
        assert "give each agent its own" in str(refused.value)
        assert not second.messages or second.messages[-1]["role"] == "user"  # it never ran
    finally:
        gate.set()
        running.join(60)
    assert answers and answers[0].strip() == "done"
    assert str(second("read every page")).strip() == "all pages read"


@pytest.mark.parametrize(
    ("strategy", "model"),
    [
        ("sliding_window", lambda: PlanModel(pages=6)),
        ("summarization", lambda: PlanModel(pages=6)),
        ("sliding_window", OnePagePerQuestion),
    ],
    ids=["window-of-one-request", "summary-of-one-request", "window-of-questions"],
)
def test_an_agent_resumed_from_its_strands_session_gets_the_history_it_had(
    tmp_path: Path, strategy: str, model: Any
) -> None:
    """Strands' session managers reload the messages from `removed_message_count` and
    prepend what `restore_from_session` gives back: the manager gave nothing back, and its
    removals are not a prefix (the request stays before the turns it moves out), so a
    resumed agent lost the note or summary naming context.jsonl and the request, and got
    an orphaned tool result. It resumes with the history it had."""
    from strands.session.file_session_manager import FileSessionManager

    def agent_of() -> Agent:
        manager = OffloadingConversationManager(
            LocalWorkspace(tmp_path / "ws", fsync=False),
            strategy=strategy,
            window_size=4,
            summary_ratio=0.5,
            preserve_recent_messages=2,
            per_turn=True,
            summary_model=False,
        )
        return Agent(
            agent_id="reader",
            model=model(),
            tools=[fetch],
            conversation_manager=manager,
            session_manager=FileSessionManager("chat", storage_dir=str(tmp_path / "strands")),
            callback_handler=None,
        )

    first = agent_of()
    for question in range(2):
        first(f"question {question}")
    had = json.loads(json.dumps(first.messages))
    assert "context.jsonl" in texts(had)
    del first

    resumed = agent_of()
    assert json.loads(json.dumps(resumed.messages)) == had
    # Its note is known as its own: the next compaction folds it in, not moves it out.
    assert list(resumed.conversation_manager._bridge._notes) == [had[0]["content"][0]["text"]]
    resumed("question 2")
    notes = [m for m in resumed.messages if "context.jsonl" in texts([m])]
    assert len(notes) == 1


FILE_BODY = "".join(
    f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
)
"""A module of 1,500 lines a model writes whole in one call (~20,000 tokens)."""


class FileWritingModel(SizeLimitedModel):
    """Refuses a request over `limit` characters as Strands' models do (an overflow); asked
    to write, calls `write_file` with `FILE_BODY` whole, then answers."""

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        size = len(json.dumps(messages, default=repr))
        if size > self.limit:
            self.refused += 1
            raise ContextWindowOverflowException(f"{size} characters, over {self.limit}")
        self.sent.append(size)
        if any("toolResult" in b for b in messages[-1]["content"]):
            events: list[dict[str, Any]] = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"text": "Written."}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        else:
            arguments = json.dumps({"path": "app/report.py", "content": FILE_BODY})
            use = {"toolUse": {"toolUseId": "w1", "name": "write_file"}}
            events = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockStart": {"start": use}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}},
                {"contentBlockStop": {}},
                {"messageStop": {"stopReason": "tool_use"}},
            ]
        for event in events:
            yield event


@tool
def write_file(path: str, content: str) -> str:
    """Write `content` to `path`."""
    return f"wrote {len(content)} characters to {path}"


def test_an_overflow_from_a_call_that_wrote_a_whole_file_cuts_its_arguments(
    tmp_path: Path,
) -> None:
    """The request after the model's own call held a whole file is refused as over the
    window: the manager cuts the call's arguments (each long string stored whole first), the
    history keeps the call with its head and a notice naming the file that holds it whole,
    its id and path, and the retried request fits (Strands' history is made again from the
    cut, so it carries the cut)."""
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(ws, session_id="s", summary_model=False)
    model = FileWritingModel(limit=20_000)
    agent = Agent(
        model=model, tools=[write_file], conversation_manager=manager, callback_handler=None
    )
    assert str(agent("write the report module")).strip() == "Written."

    assert model.refused > 0 and model.sent[-1] <= 20_000
    (use,) = [b["toolUse"] for m in agent.messages for b in m["content"] if "toolUse" in b]
    assert use["toolUseId"] == "w1" and use["input"]["path"] == "app/report.py"
    content = use["input"]["content"]
    assert "<<<TRUNCATED>>>" in content and FILE_BODY.startswith(content[:200])
    named = [p for p in (tmp_path / "ws/sessions/s").glob("tool_result-w1_*") if str(p) in content]
    assert [p.read_text(encoding="utf-8") for p in named] == [FILE_BODY]


class WriteOnceModel(FileWritingModel):
    """`FileWritingModel` for the first question; any later one is answered in words."""

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if len(self.sent) < 2:
            async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
                yield event
            return
        self.sent.append(len(json.dumps(messages, default=repr)))
        for event in [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": "Nothing more."}}},
            {"contentBlockStop": {}},
            {"messageStop": {"stopReason": "end_turn"}},
        ]:
            yield event


@pytest.mark.parametrize("per_turn", [True, False])
@pytest.mark.parametrize("strategy", ["sliding_window", "summarization"])
def test_a_call_that_wrote_a_whole_file_is_cut_before_a_request_goes_over_the_window(
    tmp_path: Path, strategy: str, per_turn: bool
) -> None:
    """A model that never refuses (its window is only what the manager is told): the call
    that held a whole file (~20,000 tokens against an 8,000-token window) was kept whole by
    the window's count (and by the summary's recent messages) and sent on with every later
    request, over the window. The manager now cuts its arguments when what it keeps is over
    the window (per turn: before the request after the call; else after the invocation,
    before the next question's): stored whole in a file first, the call keeps its id, its
    path, a head and a notice naming that file."""
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    manager = OffloadingConversationManager(
        ws,
        session_id="s",
        strategy=strategy,
        per_turn=per_turn,
        context_window=8_000,
        summary_model=False,
    )
    model = WriteOnceModel(limit=10**9)
    agent = Agent(
        model=model, tools=[write_file], conversation_manager=manager, callback_handler=None
    )
    assert str(agent("write the report module")).strip() == "Written."
    assert str(agent("anything else?")).strip() == "Nothing more."

    assert len(model.sent) == 3 and model.sent[2] < len(FILE_BODY) // 2
    if per_turn:
        assert model.sent[1] < len(FILE_BODY) // 2
    (use,) = [b["toolUse"] for m in agent.messages for b in m["content"] if "toolUse" in b]
    assert use["toolUseId"] == "w1" and use["input"]["path"] == "app/report.py"
    content = use["input"]["content"]
    assert "<<<TRUNCATED>>>" in content and FILE_BODY.startswith(content[:200])
    named = [p for p in (tmp_path / "ws/sessions/s").glob("tool_result-w1_*") if str(p) in content]
    assert [p.read_text(encoding="utf-8") for p in named] == [FILE_BODY]
