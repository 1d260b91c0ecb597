"""`evaluate`: ask a model every probe of a session, with and without one read, and grade
the replies into a report per compaction and per category; with no model, the plan and the
probes alone."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agent import Tool
from ..integrations import chat_model_of
from ..model import ChatModel
from ._ask import Answer, ask, context_messages, reading_tools
from ._grade import Verdict, is_correct, judged
from ._probes import CATEGORIES, Probe, probes_of
from ._record import SessionRecord, read_record
from ._strategies import (
    STRATEGIES,
    keeps_files,
    strategy_context,
    summarised_context,
    write_summary,
)

__all__ = ["Plan", "Report", "Result", "evaluate"]

CALLS_PER_PROBE = 3
"""The most model calls one probe costs: one with no tools, two with one read."""
JUDGE_CALLS = 2
"""The judge's calls per open probe: one per reply."""
KEY_TERMS = "key terms"
"""How open probes are graded without a judge: at least half the expected answer's key terms
in the reply."""


@dataclass(frozen=True)
class Plan:
    """What a run will ask, said before the first model call.

    Attributes:
        session: the session evaluated.
        compactions: how many compactions the session made.
        probes: how many probes will be asked.
        most_calls: the most model calls they cost: `CALLS_PER_PROBE` each, a summary per
            compaction under `langchain`, and `JUDGE_CALLS` per open probe with a judge.
        max_calls: the run stops before a probe that could take it past this many calls.
        tools: the read-back tools offered in the second mode.
        strategy: what the probes were asked after (`summary`: the session as recorded).
        context_tokens: the tokens of the contexts the probes are asked after, one per
            probe (counted here, no call made): a call costs about this much prompt.
        grading: how open probes are graded: `key terms`, or `judge NAME`.
    """

    session: str
    compactions: int
    probes: int
    most_calls: int
    max_calls: int
    tools: list[str]
    strategy: str = "summary"
    context_tokens: int = 0
    grading: str = KEY_TERMS


@dataclass
class Result:
    """One probe asked: its replies in both modes and their grades (with a judge, an open
    probe's verdicts too)."""

    probe: Probe
    no_tools: Answer
    one_read: Answer
    no_tools_correct: bool
    one_read_correct: bool
    no_tools_verdict: Verdict | None = None
    one_read_verdict: Verdict | None = None

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""

        def mode(answer: Answer, correct: bool, verdict: Verdict | None) -> dict[str, Any]:
            graded = {"verdict": verdict.text} if verdict is not None else {}
            return {**vars(answer), "correct": correct, **graded}

        return {
            **self.probe.as_dict(),
            "no_tools": mode(self.no_tools, self.no_tools_correct, self.no_tools_verdict),
            "one_read": mode(self.one_read, self.one_read_correct, self.one_read_verdict),
        }


@dataclass
class Report:
    """What a run found.

    Attributes:
        plan: what it set out to ask.
        results: each probe asked, in order.
        not_asked: probes left out: every probe when no model was given, else those that
            `max_calls` would have been passed by.
        calls: the model calls made (the judge's and the summaries' included).
        summary_tokens: tokens spent writing the strategy's own summaries (`langchain`).
        judge_tokens: tokens the judge spent.
    """

    plan: Plan
    results: list[Result] = field(default_factory=list)
    not_asked: list[Probe] = field(default_factory=list)
    calls: int = 0
    summary_tokens: int = 0
    judge_tokens: int = 0

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
            "grading": self.plan.grading,
            "calls": self.calls,
            "summary_tokens": self.summary_tokens,
            "judge_tokens": self.judge_tokens,
            "by_compaction": self.by_compaction(),
            "by_category": self.by_category(),
            "total": self.table(lambda p: "all"),
            "probes": [r.as_dict() for r in self.results],
            "not_asked": [p.as_dict() for p in self.not_asked],
        }


async def evaluate(
    workdir: str,
    session: str,
    model: object = None,
    *,
    max_calls: int = 200,
    strategy: str = "summary",
    judge: object = None,
    references: Mapping[str, str] | None = None,
    on_plan: Callable[[Plan], None] | None = None,
    on_progress: Callable[[int, int, Probe], None] | None = None,
) -> Report:
    """Ask `model` what it still knows after each compaction of a session.

    For each compaction, the probes whose answers left the context there (`probes_of`) are
    asked after the messages the agent was sent right after it (rebuilt from the record):
    once with no tools, once with the read-back tools the agent had (Read, Grep, Glob on the
    workspace) and one round of calls, run for real. Artifacts are graded by exact match
    after normalising whitespace and quotes; open questions (the task, a decision, the state
    at the cut) by `judge` with a rubric when one is given, its verdicts kept, else by their
    key terms.

    With no `model`, nothing is called: the report holds the plan and every probe in
    `not_asked` (its question, expected answer, category and where the answer lives).

    Args:
        workdir: the workspace's folder.
        session: the session id.
        model: any `ChatModel` (`OpenAIChatModel` for an OpenAI-compatible endpoint), or a
            host's model object ctxoffload has a door for, asked through that door's
            adapter (a LangChain chat model; `ctxoffload.integrations.chat_model_of` says
            which can be offered tools); None to plan only.
        max_calls: the run stops before a probe that could take it past this many calls
            (the judge's and the summaries' counted).
        strategy: what each probe is asked after: `summary`, the messages the session's
            compactions sent (the default); `clearing`, every message that left put back
            with its tool outputs replaced by placeholders naming their files; `window`,
            the messages kept alone, with read-back tools that find nothing (a sliding
            window keeps no copy); `langchain`, the messages kept after a summary `model`
            writes of what left, with a prompt of the same intent as LangChain's
            summarization, and nothing on disk. The probes are the same for all four.
        judge: a `ChatModel` (or a host's model, as `model`) that grades the open probes;
            None for key terms.
        references: for a workspace read through a local copy (a bucket's, a database's):
            each key (the store's URL) in a tool call's arguments is read as its value (the
            copy's folder).
        on_plan: called once with the plan, before the first model call.
        on_progress: called after each probe with (probes done, probes planned, probe).

    Returns:
        The report; with no compaction (or none followed by a model call) it asks nothing.

    Raises:
        InvalidSessionId: `session` is not a plain name.
        FileNotFoundError: the workspace has no such session.
        ValueError: `strategy` is not one of the four.
        ConfigError: `model` or `judge` is no model ctxoffload can ask, or `model` is a
            host's whose door's adapter offers it no tools (said before any call).
        ModelError: a model call failed; nothing after it is asked.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    asked = None if model is None else chat_model_of(model, tools=True)
    grader = None if judge is None else chat_model_of(judge, what="the judge")
    record = read_record(workdir, session)
    probes = list(probes_of(record))
    with tempfile.TemporaryDirectory(prefix="ctxoffload-eval-") as nothing:
        # A strategy that keeps no copy of what left: its tools read an empty folder.
        root = workdir if keeps_files(strategy) else nothing
        tools = reading_tools(root, record.tools)
        run = _Run(record, probes, tools, asked, grader, max_calls, strategy)
        run.references = references
        plan = run.plan()
        if on_plan is not None:
            on_plan(plan)
        if asked is None:
            return Report(plan, not_asked=probes)
        return await run.ask_all(plan, asked, on_progress)


class _Run:
    """One strategy's run over a session's probes."""

    def __init__(
        self,
        record: SessionRecord,
        probes: list[Probe],
        tools: list[Tool],
        model: ChatModel | None,
        judge: ChatModel | None,
        max_calls: int,
        strategy: str,
    ) -> None:
        self.record = record
        self.probes = probes
        self.tools = tools
        self.model = model
        self.judge = judge
        self.max_calls = max_calls
        self.strategy = strategy
        self.summaries: dict[int, str] = {}
        self.contexts: dict[int, Any] = {}
        self.references: Mapping[str, str] | None = None

    def _cost(self, probe: Probe) -> int:
        """The most calls `probe` costs, the summaries it needs written first included."""
        calls = CALLS_PER_PROBE
        if self.judge is not None and not probe.exact:
            calls += JUDGE_CALLS
        if self.strategy == "langchain":
            calls += sum(1 for n in range(1, probe.compaction + 1) if n not in self.summaries)
        return calls

    def plan(self) -> Plan:
        from ..tokens import get_token_counter

        counter = get_token_counter(getattr(self.model, "model_name", None))
        per: dict[int, int] = {}
        for probe in self.probes:
            if probe.compaction not in per:
                sent = strategy_context(
                    self.record, self.record.compactions[probe.compaction - 1], self.strategy
                )
                per[probe.compaction] = counter.count_messages(context_messages(sent))
        summaries = max((p.compaction for p in self.probes), default=0)
        open_probes = sum(not p.exact for p in self.probes)
        return Plan(
            session=self.record.session,
            compactions=len(self.record.compactions),
            probes=len(self.probes),
            most_calls=len(self.probes) * CALLS_PER_PROBE
            + (summaries if self.strategy == "langchain" else 0)
            + (open_probes * JUDGE_CALLS if self.judge is not None else 0),
            max_calls=self.max_calls,
            tools=[t.name for t in self.tools],
            strategy=self.strategy,
            context_tokens=sum(per[p.compaction] for p in self.probes),
            grading=f"judge {self.judge.model_name}" if self.judge is not None else KEY_TERMS,
        )

    async def _context(self, compaction_number: int, model: ChatModel, report: Report) -> Any:
        if compaction_number not in self.contexts:
            compaction = self.record.compactions[compaction_number - 1]
            if self.strategy == "langchain":
                # LangChain folds each summary into the next: write them in order.
                for number in range(1, compaction_number + 1):
                    if number not in self.summaries:
                        text, tokens = await write_summary(
                            model,
                            self.record,
                            self.record.compactions[number - 1],
                            self.summaries.get(number - 1),
                        )
                        self.summaries[number] = text
                        report.calls += 1
                        report.summary_tokens += tokens
                sent = summarised_context(
                    self.record, compaction, self.summaries[compaction_number]
                )
            else:
                sent = strategy_context(self.record, compaction, self.strategy)
            self.contexts[compaction_number] = context_messages(sent)
        return self.contexts[compaction_number]

    async def _grade(
        self, probe: Probe, answer: Answer, report: Report
    ) -> tuple[bool, Verdict | None]:
        if probe.exact or self.judge is None:
            return is_correct(probe, answer.text), None
        verdict = await judged(self.judge, probe, answer.text)
        report.calls += 1
        report.judge_tokens += verdict.input_tokens + verdict.output_tokens
        return verdict.correct, verdict

    async def ask_all(
        self,
        plan: Plan,
        model: ChatModel,
        on_progress: Callable[[int, int, Probe], None] | None,
    ) -> Report:
        report = Report(plan)
        for done, probe in enumerate(self.probes, start=1):
            if report.calls + self._cost(probe) > self.max_calls:
                report.not_asked = self.probes[done - 1 :]
                break
            context = await self._context(probe.compaction, model, report)
            bare = await ask(model, context, probe, None)
            report.calls += bare.calls
            read = await ask(model, context, probe, self.tools, self.references)
            report.calls += read.calls
            bare_correct, bare_verdict = await self._grade(probe, bare, report)
            read_correct, read_verdict = await self._grade(probe, read, report)
            report.results.append(
                Result(probe, bare, read, bare_correct, read_correct, bare_verdict, read_verdict)
            )
            if on_progress is not None:
                on_progress(done, len(self.probes), probe)
        return report
