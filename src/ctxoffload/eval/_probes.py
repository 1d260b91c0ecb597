"""Probes from a session's record: questions whose answers left the context at a compaction
and are not in what the model was sent right after it.

Each probe carries its expected answer, its category and where the answer lives (a line of
context.jsonl, or a line of a stored tool result), so an artifact is graded without a judge.
The same record always gives the same probes, in the same order.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from .._requests import request_of
from ..text import message_text
from ._record import Compaction, SessionRecord

__all__ = ["ARTIFACTS", "CATEGORIES", "Probe", "normalised", "probes_of", "state_at_the_cut"]

ARTIFACTS = ("path", "command", "exit_status", "error", "id", "number")
"""The categories graded by exact match."""

CATEGORIES = (*ARTIFACTS, "task", "decision", "state")
"""Every category, in the order reports list them; the last three are open questions."""

_PER_CATEGORY = 3
"""At most this many probes of one category per compaction: enough to see a pattern, few
enough that a session's calls stay countable."""

_PATH_KEYS = frozenset({"path", "file", "file_path", "filename", "filepath", "dir", "directory"})
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "shell"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
_SHELL_C = re.compile(r"-[a-z]*c[a-z]*")  # -c, -lc, -ic: the script is the next word
_ERROR_LINE = re.compile(r"\b(?:ERROR|FATAL|Traceback|[A-Z]\w*(?:Error|Exception))\b")
_IDENTIFIER = re.compile(r"\b([A-Z][A-Z0-9]{1,9})-\d{2,}\b")
_EXIT = re.compile(
    r"(?:<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\b(?:exit(?:ed)?(?: with)?(?: code| status)|return ?code|returncode)\b[:= ]+(-?\d+))",
    re.IGNORECASE,
)
_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)\n(.+?)\n```", re.DOTALL)
_DECISION = re.compile(
    r"\b(?:I will|I'll|I decided|decided to|instead of|let's|we should|I'm going to)\b",
    re.IGNORECASE,
)
_SUMMARY_OPENINGS = ("<context_summary>", "<conversation_summary>")
_QUOTES = str.maketrans({c: "" for c in "\"'`\u2018\u2019\u201c\u201d"})
_LONGEST_ANSWER = 300
_SHORTEST_FOUND = 4
"""An answer shorter than this (an exit status) is looked for in the context after only as
the line that holds it: "0" alone is in every context."""


@dataclass(frozen=True)
class Probe:
    """One question about what left the context at a compaction.

    Attributes:
        compaction: which compaction (1-based) it is asked after.
        step: the model call right after that compaction, whose messages it is asked with.
        category: one of `CATEGORIES`.
        question: what the model is asked.
        answer: the expected answer.
        where: where the answer lives: `context.jsonl:LINE` or `tool_result-ID.txt:LINE`.
        exact: graded by exact match (an artifact); False for an open question, graded
            by its key terms.
    """

    compaction: int
    step: int
    category: str
    question: str
    answer: str
    where: str
    exact: bool

    def as_dict(self) -> dict[str, Any]:
        """The probe as JSON-ready values."""
        return asdict(self)


def normalised(text: str) -> str:
    """`text` with quotes removed and every run of whitespace one space: what exact-match
    grading and the check that an answer is still in the context compare."""
    return " ".join(text.translate(_QUOTES).split())


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b["text"]
        for b in _blocks(message)
        if b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _output_text(block: dict[str, Any]) -> str:
    output = block.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            b["text"] for b in output if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _request(message: dict[str, Any]) -> str | None:
    """What the user asked in `message`, as the extractive summary reads a request
    (`request_of`): None for another role, a tool's results, a summary, or user text no one
    typed (a host's preamble such as Codex's `<environment_context>`, a tool's output)."""
    if message.get("role") != "user" or any(
        b.get("type") == "tool_result" for b in _blocks(message)
    ):
        return None
    text = _text_of(message)
    return None if _is_summary(text) else request_of(text)


def _is_summary(text: str) -> bool:
    return text.lstrip().startswith(_SUMMARY_OPENINGS)


def _arguments(block: dict[str, Any]) -> dict[str, Any]:
    value = block.get("input")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _command_of(value: Any) -> str | None:
    """The command a call's command argument runs: its text; for an argument vector (Codex
    passes `["bash", "-lc", "sed -n 1,200p a.ts"]`), the script a shell is given with `-c`
    (`-lc`, ...), else the words joined as a shell would read them; None for anything else."""
    if isinstance(value, str):
        return value.strip() or None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return None
    if len(value) == 3 and _SHELL_C.fullmatch(value[1]) and value[0].rsplit("/", 1)[-1] in _SHELLS:
        return value[2].strip() or None
    return shlex.join(value)


def _shown_arguments(arguments: dict[str, Any], limit: int = 120) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fits(answer: str) -> bool:
    return 0 < len(answer) <= _LONGEST_ANSWER and "\n" not in answer


class _Ordinals:
    """Where each of the agent's messages stands in the session, counted from its first: among
    those that ran a fenced shell command, and among those that said something. A question
    names a message by them (and by its line of context.jsonl), so it reads the same whether
    the message left the context or, under another strategy, is still in it."""

    def __init__(self, record: SessionRecord) -> None:
        self.shell: dict[int, int] = {}
        self.spoken: dict[int, int] = {}
        self.task: tuple[int, str] | None = None
        """The session's first request that left the context, with its line: the task (a
        later request, "ok continue", is not what the session was for)."""
        for compaction in record.compactions:
            for line, message in compaction.left:
                if self.task is None and (task := _request(message)) is not None:
                    self.task = line, task
                if message.get("role") != "assistant":
                    continue
                text = _text_of(message)
                if _BASH_BLOCK.search(text):
                    self.shell[line] = len(self.shell) + 1
                if text.strip():
                    self.spoken[line] = len(self.spoken) + 1


def _ordinal(number: int) -> str:
    suffix = (
        "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


_WHERE_IT_WAS = (
    "(line {line} of the file your earlier messages were moved to, if it left your context)"
)


class _Candidates:
    """The probes one compaction may ask, each with the text that, still in the context after
    it, means the probe is not asked."""

    def __init__(self, compaction: Compaction, step: int, ordinals: _Ordinals) -> None:
        self.compaction = compaction
        self.step = step
        self.ordinals = ordinals
        self.found: list[tuple[Probe, str]] = []

    def add(
        self, category: str, question: str, answer: str, where: str, needle: str | None = None
    ) -> None:
        exact = category in ARTIFACTS
        if not answer.strip() or (exact and not _fits(answer)):
            return
        probe = Probe(self.compaction.number, self.step, category, question, answer, where, exact)
        self.found.append((probe, needle if needle is not None else answer))


def _tool_calls(candidates: _Candidates) -> None:
    for line, message in candidates.compaction.left:
        for block in _blocks(message):
            if block.get("type") != "tool_call" or not isinstance(block.get("id"), str):
                continue
            call, name = block["id"], str(block.get("name"))
            for key, value in sorted(_arguments(block).items()):
                where = f"context.jsonl:{line}"
                command = _command_of(value) if key in _COMMAND_KEYS else None
                if command is not None:
                    candidates.add(
                        "command",
                        f"What command did the agent run in tool call {call} (`{name}`)? "
                        "Reply with the command only.",
                        command,
                        where,
                    )
                    continue
                if not isinstance(value, str) or key in _COMMAND_KEYS:
                    continue
                if key in _PATH_KEYS or (value.startswith("/") and " " not in value):
                    candidates.add(
                        "path",
                        f"What `{key}` did the agent pass to `{name}` in tool call {call}? "
                        "Reply with the value only.",
                        value,
                        where,
                    )


def _bash_commands(candidates: _Candidates) -> None:
    """Commands an agent wrote as fenced shell blocks in its text (mini-swe-agent, SWE-agent),
    with the exit status the next message reports."""
    left = candidates.compaction.left
    for index, (line, message) in enumerate(left):
        if message.get("role") != "assistant":
            continue
        blocks = _BASH_BLOCK.findall(_text_of(message))
        if len(blocks) != 1:
            continue
        command = blocks[0].strip()
        where = f"context.jsonl:{line}"
        nth = _ordinal(candidates.ordinals.shell[line])
        at = _WHERE_IT_WAS.format(line=line)
        candidates.add(
            "command",
            f"What was the {nth} shell command you ran in this session {at}? "
            "Reply with the command only.",
            command,
            where,
        )
        if index + 1 < len(left):
            after_line, after = left[index + 1]
            text = _text_of(after) or "\n".join(_output_text(b) for b in _blocks(after))
            found = _EXIT.search(text)
            if found is not None and _fits(command):
                candidates.add(
                    "exit_status",
                    f"What exit status did the {nth} shell command you ran in this session "
                    f"(`{command}`) return {at}? Reply with the number only.",
                    found.group(1) or found.group(2),
                    f"context.jsonl:{after_line}",
                    needle=text,
                )


def _results(record: SessionRecord, candidates: _Candidates) -> None:
    calls: dict[str, dict[str, Any]] = {}
    for line, message in candidates.compaction.left:
        for block in _blocks(message):
            if block.get("type") == "tool_call" and isinstance(block.get("id"), str):
                calls[block["id"]] = block
            if block.get("type") != "tool_result" or not isinstance(block.get("id"), str):
                continue
            call = block["id"]
            name = str(block.get("name"))
            whole = record.stored_text(call)
            text = whole if whole is not None else _output_text(block)
            file = record.stored.get(call) if whole is not None else None
            arguments = _shown_arguments(_arguments(calls.get(call, {})))
            about = f"tool call {call} (`{name}` with {arguments})"

            def where(number: int) -> str:
                return f"{file}:{number}" if file else f"context.jsonl:{line}"  # noqa: B023

            _error_probes(candidates, about, text, where)
            _exit_probe(candidates, about, text, where)
            _number_probes(candidates, call, name, text, where)


def _error_probes(candidates: _Candidates, about: str, text: str, where: Any) -> None:
    for number, row in enumerate(text.splitlines(), start=1):
        if _ERROR_LINE.search(row) is None:
            continue
        error = row.strip()
        candidates.add(
            "error",
            f"Quote the first error line in the output of {about}. Reply with that line only.",
            error,
            where(number),
        )
        found = _IDENTIFIER.search(error)
        if found is not None:
            candidates.add(
                "id",
                f"Which {found.group(1)}- identifier does the first error line in the output "
                f"of {about} name? Reply with the identifier only.",
                found.group(0),
                where(number),
                needle=error,
            )
        return


def _exit_probe(candidates: _Candidates, about: str, text: str, where: Any) -> None:
    for number, row in enumerate(text.splitlines(), start=1):
        found = _EXIT.search(row)
        if found is not None:
            candidates.add(
                "exit_status",
                f"What exit status did {about} report? Reply with the number only.",
                found.group(1) or found.group(2),
                where(number),
                needle=row.strip(),
            )
            return


def _number_probes(candidates: _Candidates, call: str, name: str, text: str, where: Any) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        return
    if not isinstance(value, dict):
        return
    rows = text.splitlines()
    for key, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            continue
        at = next((i for i, r in enumerate(rows, 1) if f'"{key}"' in r), 1)
        candidates.add(
            "number",
            f"What value of `{key}` did tool call {call} (`{name}`) return? "
            "Reply with the number only.",
            json.dumps(number),
            where(at),
            needle=f'"{key}": {json.dumps(number)}',
        )


def _open_probes(candidates: _Candidates) -> None:
    left = candidates.compaction.left
    task = candidates.ordinals.task
    if task is not None and any(line == task[0] for line, _ in left):
        candidates.add(
            "task",
            "What task did the user give you in this session? Answer in one sentence.",
            task[1][:_LONGEST_ANSWER],
            f"context.jsonl:{task[0]}",
        )
    spoken = [
        (line, _text_of(m).strip())
        for line, m in left
        if m.get("role") == "assistant" and _text_of(m).strip()
    ]
    for line, text in spoken:
        if _DECISION.search(text):
            nth = _ordinal(candidates.ordinals.spoken[line])
            candidates.add(
                "decision",
                f"What did you decide in the {nth} of your messages that said something "
                f"{_WHERE_IT_WAS.format(line=line)}? Answer in one sentence.",
                text[:_LONGEST_ANSWER],
                f"context.jsonl:{line}",
            )
    last = _last_step(left)
    if last is not None:
        line, step = last
        candidates.add(
            "state",
            "What was your last step just before your earlier messages were moved out of your "
            "context: what did you say, and which tool did you call with what? Answer in one "
            "sentence.",
            step[:_LONGEST_ANSWER],
            f"context.jsonl:{line}",
        )


def state_at_the_cut(message: dict[str, Any]) -> str:
    """The state an agent's message leaves things in, as the `state` probe expects it: what
    it said, then the last tool it called and with what (`Checked the quotas. Then called
    query_api with {"endpoint": "/v1/quotas"}`); empty when it did neither."""
    text = " ".join(_text_of(message).split())
    calls = [b for b in _blocks(message) if b.get("type") == "tool_call"]
    if not calls:
        return text
    call = calls[-1]
    step = f"called {call.get('name')} with {_shown_arguments(_arguments(call))}"
    return f"{text} Then {step}" if text else step[0].upper() + step[1:]


def _last_step(left: list[tuple[int, dict[str, Any]]]) -> tuple[int, str] | None:
    """The agent's last message before the cut that said something or called a tool, with
    its line, as `state_at_the_cut` words it."""
    for line, message in reversed(left):
        if message.get("role") == "assistant":
            step = state_at_the_cut(message)
            if step:
                return line, step
    return None


def _after_text(compaction: Compaction) -> str:
    return normalised("\n".join(message_text(m) for m in compaction.sent))


def probes_of(record: SessionRecord) -> Iterator[Probe]:
    """The probes of every compaction of a session, oldest compaction first.

    A probe is asked only when its answer left the context at that compaction (it comes from
    the span of context.jsonl that left, or from a stored result of a call in it) and is not
    in what the model was sent right after (the normalised answer, and the line or message
    holding it, found nowhere in those messages; an answer of under four characters, such as
    an exit status, only as the message holding it). A compaction the session ended after (no
    model call followed it) asks nothing.
    """
    ordinals = _Ordinals(record)
    for compaction in record.compactions:
        if compaction.step is None:
            continue
        candidates = _Candidates(compaction, compaction.step, ordinals)
        _tool_calls(candidates)
        _bash_commands(candidates)
        _results(record, candidates)
        _open_probes(candidates)
        after = _after_text(compaction)
        seen: set[tuple[str, str, str]] = set()
        counts: dict[str, int] = {}
        for category in CATEGORIES:
            for probe, needle in candidates.found:
                if probe.category != category or (category, probe.answer, probe.where) in seen:
                    continue
                if counts.get(category, 0) >= _PER_CATEGORY:
                    break
                if normalised(needle) in after or (
                    len(probe.answer) >= _SHORTEST_FOUND and normalised(probe.answer) in after
                ):
                    continue
                if probe.exact and normalised(probe.answer) in normalised(probe.question):
                    continue
                seen.add((category, probe.answer, probe.where))
                counts[category] = counts.get(category, 0) + 1
                yield probe
