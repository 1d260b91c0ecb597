"""`evaluate`: ask a model every probe of a session, with and without one read, and grade
the replies into a report per compaction and per category."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agent import Tool
from ..model import ChatModel
from ._ask import Answer, ask, context_messages, reading_tools
from ._grade import is_correct
from ._probes import CATEGORIES, Probe, probes_of
from ._record import SessionRecord, read_record
from ._strategies import STRATEGIES, keeps_files, strategy_context

__all__ = ["Plan", "Report", "evaluate", "find_probes"]

CALLS_PER_PROBE = 3
"""The most model calls one probe costs: one with no tools, two with one read."""


@dataclass(frozen=True)
class Plan:
    """What a run will ask, said before the first model call.

    Attributes:
        session: the session evaluated.
        compactions: how many compactions the session made.
        probes: how many probes will be asked.
        most_calls: the most model calls they cost (`CALLS_PER_PROBE` each).
        max_calls: the run stops before a probe that could take it past this many calls.
        tools: the read-back tools offered in the second mode.
        strategy: what the probes were asked after (`summary`: the session as recorded).
    """

    session: str
    compactions: int
    probes: int
    most_calls: int
    max_calls: int
    tools: list[str]
    strategy: str = "summary"


@dataclass
class Result:
    """One probe asked: its replies in both modes and their grades."""

    probe: Probe
    no_tools: Answer
    one_read: Answer
    no_tools_correct: bool
    one_read_correct: bool

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""
        return {
            **self.probe.as_dict(),
            "no_tools": {**vars(self.no_tools), "correct": self.no_tools_correct},
            "one_read": {**vars(self.one_read), "correct": self.one_read_correct},
        }


@dataclass
class Report:
    """What a run found.

    Attributes:
        plan: what it set out to ask.
        results: each probe asked, in order.
        not_asked: probes left out when `max_calls` would have been passed.
        calls: the model calls made.
    """

    plan: Plan
    results: list[Result] = field(default_factory=list)
    not_asked: list[Probe] = field(default_factory=list)
    calls: int = 0

    def table(self, key: Callable[[Probe], Any]) -> list[dict[str, Any]]:
        """Rows of counts grouped by `key` of each probe: asked, answered with no tools,
        answered with one read (the read-back mode), not at all, and tokens spent."""
        rows: dict[Any, dict[str, Any]] = {}
        for result in self.results:
            group = key(result.probe)
            row = rows.setdefault(
                group,
                {
                    "group": group,
                    "asked": 0,
                    "no_tools": 0,
                    "one_read": 0,
                    "not_at_all": 0,
                    "tokens_no_tools": 0,
                    "tokens_one_read": 0,
                },
            )
            row["asked"] += 1
            row["no_tools"] += result.no_tools_correct
            row["one_read"] += result.one_read_correct
            row["not_at_all"] += not (result.no_tools_correct or result.one_read_correct)
            row["tokens_no_tools"] += result.no_tools.input_tokens + result.no_tools.output_tokens
            row["tokens_one_read"] += result.one_read.input_tokens + result.one_read.output_tokens
        return list(rows.values())

    def by_compaction(self) -> list[dict[str, Any]]:
        """`table` per compaction."""
        return self.table(lambda p: p.compaction)

    def by_category(self) -> list[dict[str, Any]]:
        """`table` per category, in the order of `CATEGORIES`."""
        rows = self.table(lambda p: p.category)
        return sorted(rows, key=lambda r: CATEGORIES.index(r["group"]))

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        return {
            "plan": vars(self.plan),
            "calls": self.calls,
            "by_compaction": self.by_compaction(),
            "by_category": self.by_category(),
            "total": self.table(lambda p: "all"),
            "probes": [r.as_dict() for r in self.results],
            "not_asked": [p.as_dict() for p in self.not_asked],
        }


def find_probes(workdir: str, session: str) -> tuple[int, list[Probe]]:
    """The probes `evaluate` would ask of a session, without asking them.

    Returns:
        How many compactions the session made, and the probes (see `probes_of`): each with
        its question, expected answer, category and where the answer lives.

    Raises:
        InvalidSessionId: `session` is not a plain name.
        FileNotFoundError: the workspace has no such session.
    """
    record = read_record(workdir, session)
    return len(record.compactions), list(probes_of(record))


async def evaluate(
    workdir: str,
    session: str,
    model: ChatModel,
    *,
    max_calls: int = 200,
    strategy: str = "summary",
    on_plan: Callable[[Plan], None] | None = None,
    on_progress: Callable[[int, int, Probe], None] | None = None,
) -> Report:
    """Ask `model` what it still knows after each compaction of a session.

    For each compaction, the probes whose answers left the context there (`probes_of`) are
    asked after the messages the agent was sent right after it (rebuilt from the record):
    once with no tools, once with the read-back tools the agent had (Read, Grep, Glob on the
    workspace) and one round of calls, run for real. Artifacts are graded by exact match
    after normalising whitespace and quotes; open questions (the task, a decision, the state
    at the cut) by their key terms.

    Args:
        workdir: the workspace's folder.
        session: the session id.
        model: any `ChatModel` (`OpenAIChatModel` for an OpenAI-compatible endpoint).
        max_calls: the run stops before a probe that could take it past this many calls.
        strategy: what each probe is asked after: `summary`, the messages the session's
            compactions sent (the default); `clearing`, every message that left put back
            with its tool outputs replaced by placeholders naming their files; `window`,
            the messages kept alone, with read-back tools that find nothing (a sliding
            window keeps no copy). The probes are the same for all three.
        on_plan: called once with the plan, before the first model call.
        on_progress: called after each probe with (probes done, probes planned, probe).

    Returns:
        The report; with no compaction (or none followed by a model call) it asks nothing.

    Raises:
        InvalidSessionId: `session` is not a plain name.
        FileNotFoundError: the workspace has no such session.
        ValueError: `strategy` is not one of the three.
        ModelError: a model call failed; nothing after it is asked.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    record = read_record(workdir, session)
    probes = list(probes_of(record))
    with tempfile.TemporaryDirectory(prefix="ctxoffload-eval-") as nothing:
        # A sliding window keeps no copy of what left: its tools read an empty folder.
        root = workdir if keeps_files(strategy) else nothing
        tools = reading_tools(root, record.tools)
        return await _ask_all(
            record, probes, tools, model, max_calls, strategy, on_plan, on_progress
        )


async def _ask_all(
    record: SessionRecord,
    probes: list[Probe],
    tools: list[Tool],
    model: ChatModel,
    max_calls: int,
    strategy: str,
    on_plan: Callable[[Plan], None] | None,
    on_progress: Callable[[int, int, Probe], None] | None,
) -> Report:
    plan = Plan(
        session=record.session,
        compactions=len(record.compactions),
        probes=len(probes),
        most_calls=len(probes) * CALLS_PER_PROBE,
        max_calls=max_calls,
        tools=[t.name for t in tools],
        strategy=strategy,
    )
    if on_plan is not None:
        on_plan(plan)
    report = Report(plan)
    contexts: dict[int, Any] = {}
    for done, probe in enumerate(probes, start=1):
        if report.calls + CALLS_PER_PROBE > max_calls:
            report.not_asked = probes[done - 1 :]
            break
        if probe.compaction not in contexts:
            compaction = record.compactions[probe.compaction - 1]
            sent = strategy_context(record, compaction, strategy)
            contexts[probe.compaction] = context_messages(sent)
        context = contexts[probe.compaction]
        bare = await ask(model, context, probe, None)
        report.calls += bare.calls
        read = await ask(model, context, probe, tools)
        report.calls += read.calls
        report.results.append(
            Result(probe, bare, read, is_correct(probe, bare.text), is_correct(probe, read.text))
        )
        if on_progress is not None:
            on_progress(done, len(probes), probe)
    return report
