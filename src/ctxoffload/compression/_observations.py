"""What a message of a history is, read by its shape: a person's request or a tool's
observation, and what an observation says (its exit code, its error and result lines).

Hosts do not all mark tool output the same way. OpenAI-style histories put it in `tool`
messages and Anthropic-style ones in `tool_result` blocks, which `Msg` carries as
`ToolResultBlock`s; mini-swe-agent and SWE-agent without function calling send it back as a
plain user message (`<returncode>0</returncode><output>...`, `OBSERVATION:`); Claude Code
and Codex send their own preambles and command echoes as user messages too. The extractive
summary (`_summary_extract`) reads them all through this module, so that a command's output
is never taken for what the user asked; which user text is a request, and what it asks, is
one rule for the summary and `ctxoffload eval`'s probes (`ctxoffload/_requests.py`).

Every scan here is linear in the text it reads, and reads at most `SCAN_CHARS` of the start
and of the end of one message: an output of megabytes on one line costs no more than that.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .._depth import load_json
from .._requests import (
    SCAN_CHARS,
    SPACES,
    clean,
    is_observation_text,
    request_of,
    saved_cut,
)
from ..messages import Msg, TextBlock, ToolResultBlock
from ._notes import is_context_note

__all__ = [
    "SCAN_CHARS",
    "Observation",
    "clean",
    "is_observation_text",
    "observations_of",
    "request_text",
    "scanned",
    "unescape_json_text",
]

# Exit codes as the formats write them.
_EXIT_CODES = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"\[The command completed with exit code (-?\d+)\.\]"),
    re.compile(r"^(?:Exit code|exit status|Process exited with code)[: ]\s*(-?\d+)\b", re.M),
)
# The words an error or result line holds: one pass over the text finds the lines to read.
_KEYWORDS = re.compile(
    r"Error|Exception|ERROR|FAIL|error|fatal|panic|ERR!|not found|No such file|denied"
    r"|Segmentation|Traceback|[Aa]ssert|Ran \d+ tests?|passed|SUCCESS|PASS|ERR_|failed in"
)
_ERROR_LINE = re.compile(
    r"""(?:
        (?:E\s+)?(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Failure|Exit)\b(?::.*)?
      | (?:ERROR|FAIL|FAILED|FAILURE|FATAL|PANIC)\b.*
      | .{0,300}?:\d+(?::\d+)?:\s*(?:fatal\s+)?error\b.*
      | (?:error|fatal|panic)(?:\[[\w-]+\])?:.*
      | (?:[A-Za-z]+\s){1,3}(?:error|Error|ERROR):.*
      | .{0,200}?\b[A-Z]\w*(?:Error|Exception):\s.*
      | failed\ in\ sandbox\b.*
      | [=_]{3,}\s*(?:ERRORS?|FAIL\w*)\b.*
      | \S+::\S+\s+(?:FAILED|ERROR)\b.*
      | (?:npm\s+ERR!|ERR_[A-Z_]+\b).*
      | .{0,300}?\b(?:command\ not\ found|No\ such\ file\ or\ directory|Permission\ denied
          |Segmentation\ fault|[Aa]ssertion\ failed|AssertionError)\b.*
    )\Z""",
    re.VERBOSE,
)
_RESULT_LINE = re.compile(
    r"(?:=+\s*)?(?:\d+ (?:passed|failed|errors?|skipped|xfailed|warnings?)[, ]*)+.*"
    r"|Ran \d+ tests? in .*|(?:SUCCESS|PASSED|PASS|All tests passed)\b.*"
)
_TRACEBACK = "Traceback (most recent call last):"


def scanned(text: str) -> str:
    """`text`, or its first and last `SCAN_CHARS` characters joined by a newline."""
    if len(text) <= 2 * SCAN_CHARS:
        return text
    return text[:SCAN_CHARS] + "\n" + text[-SCAN_CHARS:]


def request_text(msg: Msg) -> str | None:
    """The substance of a person's request in `msg` (`request_of` its text), or None when
    `msg` is not one: not a user's, a tool result, ctxoffload's own note, or no request."""
    if msg.role != "user" or msg.tool_results or is_context_note(msg):
        return None
    return request_of(msg.text[: 2 * SCAN_CHARS])


@dataclass
class Observation:
    """What one tool call or command gave back.

    Attributes:
        index: the message's place in the history read.
        message: the message it came in.
        text: its text (what the model read of it).
        exit_code: the exit code it states, when it states one.
        is_error: the host marked it failed.
        file: the file ctxoffload saved the whole output in, when it was cut.
    """

    index: int
    message: Msg
    text: str
    exit_code: int | None = None
    is_error: bool = False
    file: str | None = None
    _lines: tuple[list[str], list[str]] | None = field(default=None, repr=False)

    @property
    def failed(self) -> bool:
        """It failed, as the host or its exit code says."""
        return self.is_error or (self.exit_code is not None and self.exit_code != 0)

    def lines(self) -> tuple[list[str], list[str]]:
        """Its error lines and its result lines, in order, each once."""
        if self._lines is None:
            self._lines = _read_lines(self.text)
        return self._lines


def observations_of(messages: list[Msg] | tuple[Msg, ...], index: int) -> Iterator[Observation]:
    """The observations `messages[index]` carries: one per tool result, or the message itself
    when it is a user message shaped as a tool's output."""
    msg = messages[index]
    if not isinstance(msg.content, str):
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                yield _observation(index, msg, _output_text(block), block.is_error)
    if msg.role == "user" and not msg.tool_results and is_observation_text(msg.text[:4000]):
        yield _observation(index, msg, msg.text, False)


def _output_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "\n".join(b.text for b in block.output if isinstance(b, TextBlock))


def _observation(index: int, msg: Msg, text: str, is_error: bool) -> Observation:
    text = clean(scanned(text))
    exit_code = None
    stripped = text.lstrip()
    if stripped.startswith('{"output"'):  # Codex: {"output": "...", "metadata": {...}}
        try:
            value = load_json(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            text = value["output"]
            metadata = value.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            exit_code = code if isinstance(code, int) else None
        else:  # cut by ctxoffload, so no longer JSON: its escapes read back by hand
            text = unescape_json_text(stripped.removeprefix('{"output":"'))
    text, file = saved_cut(text)
    if exit_code is None:
        for pattern in _EXIT_CODES:
            found = pattern.search(text[:300]) or pattern.search(text[-300:])
            if found is not None:
                exit_code = int(found.group(1))
                break
    return Observation(index, msg, text, exit_code, is_error, file)


_JSON_ESCAPE = re.compile(r'\\(["\\/nrt])')
_JSON_ESCAPED = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}


def unescape_json_text(text: str) -> str:
    """The text of a JSON string's body that is cut short (so no JSON parser reads it): its
    common escapes (`\\n`, `\\"`, ...) read back."""
    return _JSON_ESCAPE.sub(lambda m: _JSON_ESCAPED[m.group(1)], text)


def _read_lines(text: str) -> tuple[list[str], list[str]]:
    """The error lines and the result lines of an output: each line holding a keyword is
    read, and a traceback gives its last line (the exception)."""
    errors: dict[str, None] = {}
    results: dict[str, None] = {}
    end = -1
    for hit in _KEYWORDS.finditer(text):
        if hit.start() <= end:
            continue  # a line already read
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.start())
        end = len(text) if end < 0 else end
        line = text[start:end].strip()
        if line.startswith(_TRACEBACK):
            exception = _exception_after(text, end)
            if exception is not None:
                errors[exception] = None
            continue
        if text[start : start + 1] in (" ", "\t"):
            # An indented line is part of something longer (a traceback's frame, a listed
            # source file, a docstring's `ValueError: ...`): the error is its unindented end.
            continue
        if _ERROR_LINE.match(line):
            errors[_one_line(line)] = None
        elif _RESULT_LINE.fullmatch(line):
            if line.startswith("Ran "):  # unittest: the verdict is on the next line
                line += f": {_next_line(text, end)}"
            results[_one_line(line)] = None
    return list(errors), list(results)


def _exception_after(text: str, at: int) -> str | None:
    """The exception line a traceback starting before `at` ends with: its first line after
    it that is not indented (within 400 lines)."""
    for _ in range(400):
        if at >= len(text):
            return None
        end = text.find("\n", at + 1)
        end = len(text) if end < 0 else end
        line = text[at + 1 : end]
        if line.strip() and line[:1] not in (" ", "\t") and not line.startswith("During "):
            return None if line.startswith(_TRACEBACK) else _one_line(line)
        at = end
    return None


def _next_line(text: str, at: int) -> str:
    """The first line after `at` that holds something (within a few lines)."""
    for line in text[at : at + 400].split("\n")[1:6]:
        if line.strip():
            return line.strip()
    return ""


def _one_line(line: str, limit: int = 200) -> str:
    line = SPACES.sub(" ", line).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
