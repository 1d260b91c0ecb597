"""What a person asked, read from the text of a user message: the one rule for telling a
request from what hosts send as user text without anyone typing it (a tool's output sent
back as user text, a host's preamble or command echo, a note that the user interrupted), and
for reading the request's substance out of its wrappers.

The extractive summary's task (`compression/_observations.py`) and `ctxoffload eval`'s task
probe (`eval/_probes.py`) both read a request through here, so a summary and a probe never
disagree on what the user asked. Each read is bounded: at most `2 * SCAN_CHARS` of a text.
"""

from __future__ import annotations

import re

from .text import TRUNCATION_MARKER

__all__ = [
    "SCAN_CHARS",
    "SPACES",
    "clean",
    "is_observation_text",
    "request_of",
    "saved_cut",
]

SCAN_CHARS = 100_000
"""The most characters read from each end of one message: errors and results sit at the
start or the end of an output, and the whole message is in the context log."""

# User messages that are no request, matched at the text's start.
_NOT_A_REQUEST = re.compile(
    r"""\A\s*(?:
        <returncode>|<output>|<output_head>|<warning>|<error>|<observation>
      | OBSERVATION:|Observation:|Tool\s+(?:output|result):|\[Tool\s+result
      | <tool_result|<tool_response>|<function_results>|<function_result>
      | <local-command-std(?:out|err)>|<bash-std(?:out|err)>|<bash-input>
      | <environment_context>|<user_instructions>
      | Caveat:\s+The\s+messages\s+below\s+were\s+generated
      | \[Request\s+interrupted
      | Your\s+command\s+ran\s+successfully
      | Please\s+always\s+provide\s+EXACTLY\s+ONE\s+action
    )""",
    re.VERBOSE,
)
# A slash command as Claude Code records it; only one given arguments asks for something.
_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]*)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# Codex from an IDE: the open tabs first, then the request under this heading.
_IDE_REQUEST = "## My request for Codex:"
# A tag alone on its line (`<pr_description>`, `</task>`): a wrapper, whose content stays.
_WRAPPER_LINE = re.compile(r"^[ \t]*</?[A-Za-z_][\w.-]{0,40}>[ \t]*$", re.MULTILINE)
_WRAPPER_EDGE = re.compile(r"\A\s*<[A-Za-z_][\w.-]{0,40}>|</[A-Za-z_][\w.-]{0,40}>\s*\Z")
SPACES = re.compile(r"[ \t\r\f\v]+")
"""A run of spaces and tabs (no newline), folded to one space where text is shown."""
_BLANK_LINES = re.compile(r"\n\s*\n+")
_SAVED_IN = re.compile(r"saved in:\n([^\n]+)\n|; all in (\S+) \(")
_REMINDER_OPEN, _REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"


def clean(text: str) -> str:
    """`text` without NUL bytes and lone surrogates, which no summary should carry."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_observation_text(text: str) -> bool:
    """Whether a user message's text is no request: a tool's output, a host's preamble, an
    interruption note (see the module's docstring)."""
    head = text[:400]
    if _NOT_A_REQUEST.match(head):
        return True
    name = _COMMAND_NAME.search(head)
    if name is not None:  # a slash command with no arguments (`/clear`) asks nothing
        arguments = _COMMAND_ARGS.search(text[:4000])
        return arguments is None or not arguments.group(1).strip()
    return False


def saved_cut(text: str) -> tuple[str, str | None]:
    """`text` up to the marker of a cut ctxoffload made in it, and the file its notice says
    holds the whole (None where it names none); `text` and None where nothing was cut."""
    cut = text.find(TRUNCATION_MARKER)
    if cut < 0:
        return text, None
    found = _SAVED_IN.search(text, cut)
    return text[:cut], (found.group(1) or found.group(2)) if found else None


def request_of(text: str) -> str | None:
    """The substance of the request a user message's `text` makes, whitespace folded, or
    None when it makes none (a tool's output, a preamble, a note, nothing but spaces).

    Wrapper tags on lines of their own (`<pr_description>`, `<task>`) go and their content
    stays; a slash command reads `/name arguments`; a Codex request from an IDE is the text
    under its heading; a request ctxoffload cut keeps its start and names the file.
    """
    text = text[: 2 * SCAN_CHARS]
    if not text.strip() or is_observation_text(text):
        return None
    text, saved = saved_cut(text)
    text = _without_reminders(text)
    name = _COMMAND_NAME.search(text[:400])
    if name is not None:
        arguments = _COMMAND_ARGS.search(text)
        text = f"{name.group(1)} {arguments.group(1) if arguments else ''}"
    at = text.find(_IDE_REQUEST)
    if at >= 0:
        text = text[at + len(_IDE_REQUEST) :]
    text = _WRAPPER_EDGE.sub("", _WRAPPER_LINE.sub("", text))
    text = _BLANK_LINES.sub("\n", SPACES.sub(" ", clean(text))).strip()
    if not text:
        return None
    return f"{text} (the whole request is in {saved})" if saved else text


def _without_reminders(text: str) -> str:
    """`text` without the `<system-reminder>` blocks a host adds to a user's message (Claude
    Code puts them beside the words typed); an unclosed one is left as it is."""
    parts = []
    at = 0
    while (start := text.find(_REMINDER_OPEN, at)) >= 0:
        end = text.find(_REMINDER_CLOSE, start)
        if end < 0:
            break
        parts.append(text[at:start])
        at = end + len(_REMINDER_CLOSE)
    parts.append(text[at:])
    return "".join(parts)
