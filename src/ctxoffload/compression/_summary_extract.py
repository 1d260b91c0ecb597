"""The extractive summary: the five fields built from the messages that leave, with no model.

It is what the model continues from when no summary model writes one (none given, a
timeout, a failure, the opt-out), so it says what a model would have said, each thing with
where it lives:

- task_overview: the first request's substance (never a tool's output, `_observations`),
  and the latest request when a later one was made;
- current_state: the last thing the assistant said it was doing, and the last command with
  its outcome;
- important_discoveries: the error lines, failing tests and exceptions found in the output
  that left, the results (tests passed) and what the assistant found, newest first, each
  with the line of context.jsonl or the file that holds it;
- next_steps: the last plan the assistant stated (a plan tool's open steps, a numbered
  list, "Next I will ...");
- context_to_preserve: the files edited or created, the commands that worked, the files
  offloaded.

Each field holds at most `EXTRACTIVE_FIELD_CHARS` characters, the newest or most important
material first, and an earlier extractive summary is merged into it section by section, so
summaries folded into one another over many compressions neither grow nor repeat themselves.
A previous summary written by a model is kept, shortened, after the new material. The
messages are read newest first and only as far as each field needs.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..messages import Block, Msg, ToolCallBlock
from ._index import CUT_MARK, NEWLINE_MARK, message_commands
from ._observations import Observation, clean, observations_of, request_text, scanned
from ._summary_model import Summary

__all__ = ["EXTRACTED_NOTE", "EXTRACTIVE_FIELD_CHARS", "extractive_summary"]

EXTRACTIVE_FIELD_CHARS = 2_000
"""The most characters one field of an extractive summary holds. Each field is built newest
first and cut at the end, so what is cut is the oldest material, and the size stays the same
however many compressions came before."""

EXTRACTED_NOTE = (
    "(Extracted without a summary model: the exact messages are in the context log named above.)"
)
"""How an extractive summary's next steps begin: the mark by which the next one knows it
(at the start, which no cut to the summary budget reaches)."""
# What extractive summaries said instead before they named a plan (sessions written then).
_EARLIER_NEXT_STEPS = (
    "Continue with the latest request. This summary was extracted without a summary "
    "model; read the context log named above for the exact messages."
)

_REQUEST_CHARS = 600
_LATEST_CHARS = 300
_SENTENCE_CHARS = 1_200
"""The most characters quoted of a request: `_REQUEST_CHARS`, or more to end its first
sentence, up to this."""
_STATE_CHARS = 600
"""The most characters of the last assistant message an extractive summary quotes: where the
work stands; the message is whole in the context log the summary names."""
_ITEM_CHARS = 200
_ERRORS, _RESULTS, _FINDINGS, _COMMANDS, _FILES = 12, 4, 3, 6, 12
_LINES_PER_OUTPUT = 6
_NO_OUTPUT = "no output"
_READ_BACK = 400
"""The most messages read back (newest first) for the errors, results, edited files and
commands of what left: a history of thousands of messages folded in at once (a resumed
session) costs no more than this, and what is older is in the context log and its index."""

_LIST_ITEM = re.compile(r"^- (.+)$", re.MULTILINE)
_TOOLS_LINE = re.compile(r"^Tools used: (.*)$", re.MULTILINE)
_TOOL_COUNT = re.compile(r"(\S+) x(\d+)")
_WHERE = re.compile(r" \((?:context\.jsonl line \d+|in [^()]+)\)$")
_FIRST_SENTENCE = re.compile(r"[.!?](?=\s|$)")
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SPACES = re.compile(r"\s+")
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.{3,})$", re.MULTILINE)
# What says a list is a plan, in the lines just before its first item.
_PLAN_WORDS = re.compile(
    r"\b(?:[Pp]lan|[Nn]ext|[Ss]teps?|will|[Tt]o ?do|going to|[Ll]et(?: me|['’]s))\b"
)
_BLANKS = re.compile(r"\n\s*\n\s*")
_PLAN_SENTENCE = re.compile(
    r"(?:^|(?<=[.!?:]\s))(?:Next,?\s+I(?:['’]ll| will)|Now,?\s+I(?:['’]ll| will| need to)"
    r"|I(?:['’]ll| will| need to| should)|Let(?: me|['’]s)|Then,?\s+I)\b[^.!?\n]*[.!?]?",
    re.MULTILINE,
)
_FINDING = re.compile(
    r"(?:^|(?<=[.!?]\s))[^.!?\n]*\b(?:[Tt]he (?:issue|problem|bug|root cause|cause|fix) "
    r"(?:is|was)|I found|[Ff]ound (?:it|that)|[Tt]his (?:means|confirms)|[Tt]he fix works)"
    r"\b[^.!?\n]*[.!?]?",
    re.MULTILINE,
)
# Edits a shell command makes (`_shell_edits`): `sed -i ... FILE`, `> FILE`, `>> FILE`,
# `tee FILE`, `touch FILE`.
_LOGICAL_LINES = 20  # the most lines a quote or a trailing backslash is followed over
_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})  # their target is written
_TOUCH_VALUED = frozenset({"-d", "-t", "-r", "--date", "--reference"})  # take the next word
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add) File: (\S+)", re.MULTILINE)
_PATH_KEYS = ("path", "file_path", "filename", "notebook_path", "target_file", "file")
_EDIT_WORDS = ("edit", "write", "create", "replace", "insert", "patch")
_READ_ONLY = frozenset(
    [
        "ls",
        "cat",
        "head",
        "tail",
        "grep",
        "rg",
        "find",
        "pwd",
        "cd",
        "echo",
        "wc",
        "nl",
        "tree",
        "which",
        "file",
        "stat",
        "less",
        "more",
        "sort",
        "uniq",
        "diff",
        "du",
        "df",
        "env",
        "printenv",
        "type",
        "awk",
    ]
)


def extractive_summary(
    messages: Sequence[Msg],
    *,
    previous: Summary | None = None,
    artifacts: Sequence[str] = (),
    lines: Mapping[str, int] | None = None,
) -> Summary:
    """A summary built from the messages themselves, with no model (see the module).

    Args:
        messages: the messages leaving the context, oldest first.
        previous: the summary of what left before, merged in.
        artifacts: the offloaded files the summary names itself, newest first.
        lines: the line of context.jsonl holding each message, by id, when known: each
            discovery names it.
    """
    before = (
        previous.model_dump() if previous is not None else dict.fromkeys(Summary.model_fields, "")
    )
    steps = before["next_steps"]
    ours = previous is not None and (
        steps.startswith(EXTRACTED_NOTE) or steps == _EARLIER_NEXT_STEPS
    )
    theirs = previous is not None and not ours
    history = _History(messages, lines)

    def field_text(parts: list[str], name: str) -> str:
        """The field `name`: the new material, then a model's earlier text of it."""
        return _fit([*parts, f"Earlier summary: {before[name]}"] if theirs else parts)

    state = _state(history) or (
        before["current_state"] if previous is not None else "No assistant reply yet."
    )
    plan = _plan(history)
    if plan is None:
        earlier = steps.removeprefix(EXTRACTED_NOTE).strip() if ours else ""
        plan = earlier if earlier and steps != _EARLIER_NEXT_STEPS else None
    summary = Summary(
        task_overview=field_text(_overview(history, before, ours), "task_overview")
        or "No request in the compressed messages (the request stays in the context).",
        current_state=_fit([state]),
        important_discoveries=field_text(
            _discoveries(history, before, ours), "important_discoveries"
        )
        or "No error, failure or result in the compressed messages.",
        next_steps=_fit([EXTRACTED_NOTE, plan or "Continue with the latest request."]),
        context_to_preserve=field_text(
            _preserved(history, artifacts, before, ours), "context_to_preserve"
        )
        or "No file edited or offloaded in the compressed messages.",
    )
    # What the fields quote may hold a NUL or a lone surrogate (a tool's bytes, read
    # leniently): neither is written to a summary, which goes to disk and to a model.
    return summary.model_copy(update={k: clean(v) for k, v in summary.model_dump().items()})


class _History:
    """The messages that leave, with what the fields ask of them computed once."""

    def __init__(self, messages: Sequence[Msg], lines: Mapping[str, int] | None) -> None:
        self.messages = tuple(messages)
        self.lines = lines or {}
        self._commands: dict[int, list[str]] = {}

    def where(self, msg: Msg, file: str | None = None) -> str:
        """` (in FILE)` or ` (context.jsonl line N)`, or nothing when neither is known."""
        if file:
            return f" (in {file})"
        line = self.lines.get(msg.id)
        return f" (context.jsonl line {line})" if line is not None else ""

    def newest(self, role: str) -> Iterable[tuple[int, Msg]]:
        """The messages of `role`, newest first, with their index."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == role:
                yield index, self.messages[index]

    def commands(self, index: int) -> list[str]:
        """The commands the assistant message at `index` runs (its tool calls' and shell
        blocks'), each on one line."""
        if index not in self._commands:
            msg = self.messages[index]
            # An editor's call (a path and a sub-command such as `view`) runs no command.
            shell = [c for c in msg.tool_calls if not any(k in c.input for k in _PATH_KEYS)]
            if len(shell) < len(msg.tool_calls):
                msg = Msg(role="assistant", content=list[Block](shell))
            self._commands[index] = [clean(c) for c in message_commands(msg)]
        return self._commands[index]

    def outcome(self, index: int) -> list[Observation]:
        """The observations answering the assistant message at `index`: those up to the
        next assistant message."""
        found: list[Observation] = []
        for after in range(index + 1, len(self.messages)):
            if self.messages[after].role == "assistant":
                break
            found += observations_of(self.messages, after)
        return found


def _call_text(call: ToolCallBlock) -> str:
    """A tool call in one line: its name and its short arguments."""
    arguments = ", ".join(
        f"{key}={_one_line(str(value), 60)!r}"
        for key, value in call.input.items()
        if isinstance(value, str | int)
    )
    return f"{call.name}({arguments})"


def _one_line(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fit(parts: list[str], limit: int = EXTRACTIVE_FIELD_CHARS) -> str:
    """Join `parts` (newest or most important first) and cut the end to `limit`."""
    text = "\n\n".join(p for p in parts if p.strip())
    return _one_line_keep(text, limit)


def _one_line_keep(text: str, limit: int) -> str:
    """`text`, its end cut to `limit` characters with `…` (its newlines kept)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _section(text: str, *titles: str) -> list[str]:
    """The `- item` lines under the first of `titles` found in an earlier extractive field."""
    for title in titles:
        head, found, rest = text.partition(f"{title}:\n")
        if found and (not head or head.endswith("\n")):
            return _LIST_ITEM.findall(rest.split("\n\n", 1)[0])
    return []


def _line_after(text: str, label: str) -> str | None:
    """The text after `label: ` on its own line of an earlier extractive field, if any."""
    found = re.search(rf"^{re.escape(label)}: (.*)$", text, re.MULTILINE)
    return found.group(1) if found else None


def _unique(items: Iterable[str], most: int, *, files: bool = False) -> list[str]:
    """`items` each once, at most `most`: told apart without where they are, or, for
    `files` (`path (size, lines, source)`), by their path alone."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.split(" (", 1)[0] if files else _WHERE.sub("", item)
        if key not in seen:
            seen.add(key)
            out.append(item)
            if len(out) == most:
                break
    return out


def _listed(title: str, items: Sequence[str]) -> list[str]:
    return [f"{title}:\n" + "\n".join(f"- {item}" for item in items)] if items else []


# -- task_overview -------------------------------------------------------------------------


def _quote_request(text: str) -> str:
    """A request quoted: `_REQUEST_CHARS` characters, or as many as end its first sentence."""
    end = _FIRST_SENTENCE.search(text, 0, _SENTENCE_CHARS)
    # The sentence, its next character and the `…` a cut adds.
    limit = max(_REQUEST_CHARS, end.end() + 2 if end is not None else _REQUEST_CHARS)
    return _one_line(text, limit)


def _overview(history: _History, before: dict[str, str], ours: bool) -> list[str]:
    """The first request ever (kept from an earlier extractive summary, `ours`), then the
    latest request when it is another."""
    first = _line_after(before["task_overview"], "First request") if ours else None
    if first is None:
        first = next(
            (
                _quote_request(text) + history.where(msg)
                for msg in history.messages
                if (text := request_text(msg)) is not None
            ),
            None,
        )
    latest = next(
        (
            _one_line(text, _LATEST_CHARS) + history.where(msg)
            for _, msg in history.newest("user")
            if (text := request_text(msg)) is not None
        ),
        None,
    )
    if latest is None and ours:
        latest = _line_after(before["task_overview"], "Latest request")
    overview = [f"First request: {first}"] if first else []
    if latest and _opening(latest) != _opening(first or ""):
        overview.append(f"Latest request: {latest}")
    return ["\n".join(overview)] if overview else []


def _opening(quoted: str) -> str:
    """How a quoted request is told apart from another however each was cut: its opening."""
    return _WHERE.sub("", quoted).removesuffix("…")[: _LATEST_CHARS - 2]


# -- current_state -------------------------------------------------------------------------


def _intent(text: str) -> str:
    """What an assistant message says it is doing: its words without its code blocks."""
    words = _FENCED.sub("", scanned(text)).strip().removeprefix("THOUGHT:").strip()
    return _one_line_keep(_BLANKS.sub("\n\n", clean(words or text)), _STATE_CHARS)


def _verdict(found: list[Observation]) -> str:
    """An outcome in a few words: its exit code, and its error, its result or its end."""
    if not found:
        return "its output is in the messages kept"
    last = found[-1]
    errors, results = last.lines()
    code = f"exit {last.exit_code}" if last.exit_code is not None else None
    if errors and last.failed:
        said = errors[0]
    elif results:
        said = results[-1]
    elif errors:
        said = errors[0]
    elif last.failed:
        said = _last_line(last.text)
    else:
        said = "ok" if code is None else ""
    return ": ".join(part for part in (code or ("failed" if last.failed else None), said) if part)


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()[-20:]):
        if line.strip() and not line.strip().startswith("<"):
            return _one_line(line, _ITEM_CHARS)
    return _NO_OUTPUT


def _state(history: _History) -> str | None:
    """The last assistant message's intent and the last command run with its outcome."""
    said = next((msg.text for _, msg in history.newest("assistant") if msg.text.strip()), None)
    parts = [f"Last assistant message: {_intent(said)}"] if said is not None else []
    for index, msg in history.newest("assistant"):
        # A call that runs no command (an editor's, a search's) is named with its arguments.
        commands = history.commands(index) or [_call_text(c) for c in msg.tool_calls]
        if commands:
            command = _one_line(commands[-1], _ITEM_CHARS)
            parts.append(f"Last command: {command} -> {_verdict(history.outcome(index))}")
            break
    return "\n".join(parts) or None


# -- important_discoveries -----------------------------------------------------------------


def _discoveries(history: _History, before: dict[str, str], ours: bool) -> list[str]:
    """Errors and failures, results and findings, newest first, each with where it is, and
    the tools used (all merged with an earlier extractive summary's, `ours`)."""
    errors: list[str] = []
    said: set[str] = set()
    read = 0  # the messages read for their outputs
    results: list[str] = []
    findings: list[str] = []
    tools: Counter[str] = Counter()
    for index in range(len(history.messages) - 1, -1, -1):
        msg = history.messages[index]
        tools.update(call.name for call in msg.tool_calls)
        if msg.role == "assistant":
            if len(findings) < _FINDINGS and msg.text:
                text = _FENCED.sub(" ", scanned(msg.text))
                said_here = [f.group(0).removeprefix("THOUGHT:") for f in _FINDING.finditer(text)]
                findings += [_one_line(f, _ITEM_CHARS) for f in said_here[-1:]]
            continue
        read += 1
        if read > _READ_BACK or (len(errors) >= _ERRORS and len(results) >= _RESULTS):
            continue  # enough read: the older outputs only count their tools
        for seen in observations_of(history.messages, index):
            failed, passed = seen.lines()
            where = history.where(msg, seen.file)
            if not failed and seen.failed and _last_line(seen.text) != _NO_OUTPUT:
                failed = [_last_line(seen.text)]
            # One item an output, its lines in their order: where it is is said once.
            failed = [line for line in failed if line not in said]
            said.update(failed)
            if failed:
                errors.append(" | ".join(failed[:_LINES_PER_OUTPUT]) + where)
            results += [f"{line}{where}" for line in reversed(passed)]
    if ours:
        earlier = before["important_discoveries"]
        errors += _section(earlier, "Errors and failures (newest first)", "Errors reported")
        results += _section(earlier, "Results")
        findings += _section(earlier, "Findings")
        for line in _TOOLS_LINE.findall(earlier):
            for name, count in _TOOL_COUNT.findall(line):
                tools[name] += int(count)
    parts = [
        *_listed("Errors and failures (newest first)", _unique(errors, _ERRORS)),
        *_listed("Results", _unique(results, _RESULTS)),
        *_listed("Findings", _unique(findings, _FINDINGS)),
    ]
    if tools:
        parts.append("Tools used: " + ", ".join(f"{n} x{c}" for n, c in tools.most_common()))
    return parts


# -- next_steps ----------------------------------------------------------------------------


def _plan(history: _History) -> str | None:
    """The last plan the assistant stated: a plan tool's open steps, a numbered list, or
    the sentences saying what it does next."""
    for _, msg in history.newest("assistant"):
        for call in reversed(msg.tool_calls):
            steps = _plan_steps(call.input)
            if steps:
                return "\n".join(f"- {step}" for step in steps[:_COMMANDS])
        if not msg.text.strip():
            continue
        text = _FENCED.sub(" ", scanned(msg.text))
        items = list(_NUMBERED.finditer(text))
        lead = text[max(0, items[0].start() - 200) : items[0].start()] if items else ""
        if len(items) >= 2 and _PLAN_WORDS.search(lead):
            steps = [_one_line(item.group(1), _ITEM_CHARS) for item in items[-_COMMANDS:]]
            return "\n".join(f"- {step}" for step in steps)
        sentences = [_one_line(s.group(0), _ITEM_CHARS) for s in _PLAN_SENTENCE.finditer(text)]
        if sentences:
            return " ".join(sentences[-2:])
    return None


def _plan_steps(arguments: Mapping[str, Any]) -> list[str]:
    """The open steps of a plan tool's call (Codex `update_plan`, Claude Code `TodoWrite`)."""
    steps = arguments.get("plan") or arguments.get("todos")
    if not isinstance(steps, list):
        return []
    out = []
    for step in steps:
        if not isinstance(step, Mapping) or step.get("status") == "completed":
            continue
        text = step.get("step") or step.get("content")
        if isinstance(text, str) and text.strip():
            out.append(f"[{step.get('status', 'pending')}] {_one_line(text, _ITEM_CHARS)}")
    return out


# -- context_to_preserve -------------------------------------------------------------------


def _edited(call_or_command: ToolCallBlock | str) -> list[str]:
    """The files a tool call or a shell command edits or creates."""
    if isinstance(call_or_command, ToolCallBlock):
        call = call_or_command
        name = call.name.lower()
        texts = [v for v in call.input.values() if isinstance(v, str)]
        patched = [p for text in texts for p in _PATCH_FILE.findall(text)]
        if patched:
            return patched
        if call.input.get("command") in ("view", "read") or not any(w in name for w in _EDIT_WORDS):
            return []
        return [v for k in _PATH_KEYS if isinstance(v := call.input.get(k), str) and v][:1]
    command = call_or_command
    return _PATCH_FILE.findall(command) + _shell_edits(command)


def _shell_edits(command: str) -> list[str]:
    """The files the first command line of `command` edits or creates, read as the shell
    reads its words (`_first_words`): each `sed -i`'s files, each `>` or `>>` target (not
    under /dev/), each file `tee` or `touch` names."""
    files: list[str] = []
    for part in _simple_commands(_first_words(command)):
        words, written = _redirections(part)
        files += _sed_files(words)
        files += written
        name = words[0].rsplit("/", 1)[-1] if words else ""
        if name in ("tee", "touch"):
            files += _operands(words[1:], _TOUCH_VALUED if name == "touch" else frozenset())
    return files


def _redirections(words: list[str]) -> tuple[list[str], list[str]]:
    """A simple command's words without its redirections (each operator, its target, and
    the descriptor before it: `2>&1`, `< in.txt`, `<<EOF`), and the files its output
    redirections write, but those under /dev/."""
    kept: list[str] = []
    written: list[str] = []
    rest = iter(words)
    for word in rest:
        if ("<" in word or ">" in word) and not word.strip("<>&|"):
            target = next(rest, None)
            if kept and kept[-1].isdigit():
                kept.pop()  # (the descriptor redirected: the shell reads `2>` as one)
            if target is not None and word in _OUTPUT_REDIRECTS and not target.startswith("/dev/"):
                written.append(target)
        else:
            kept.append(word)
    return kept, written


def _operands(words: list[str], valued: frozenset[str]) -> list[str]:
    """A command's operands: its words but its options (and the value of each in `valued`),
    and every word after `--`."""
    found: list[str] = []
    rest = iter(words)
    for word in rest:
        if word == "--":
            found += rest
        elif word in valued:
            next(rest, None)
        elif not word.startswith("-"):
            found.append(word)
    return found


def _first_words(command: str) -> list[str]:
    """The words of a command's first line as the shell splits them, its operators apart: a
    quote left open, or a trailing backslash, takes in the next line (up to
    `_LOGICAL_LINES`; a here-document's body, after the line, is not read). No words when
    the line cannot be read whole (a quote never closed), and not the last word when the
    command was cut there (`[…]`)."""
    lines = command.split(NEWLINE_MARK)[:_LOGICAL_LINES]
    text = ""
    for count, line in enumerate(lines, 1):
        text += line
        more = count < len(lines)
        if text.endswith("\\"):
            text = text[:-1] + " "  # a continued line: the shell joins it to the next
            if more:
                continue
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # a quote still open: its text goes on on the next line
            text += "\n"
            continue
        if not more and text.endswith(CUT_MARK):
            return words[:-2]  # (`[…]` and the word it cut)
        return words
    return []


def _simple_commands(words: list[str]) -> Iterable[list[str]]:
    """The simple commands among a line's words, split at the shell's operators."""
    part: list[str] = []
    for word in words:
        if word in _SHELL_OPERATORS:
            yield part
            part = []
        else:
            part.append(word)
    yield part


def _sed_files(words: list[str]) -> list[str]:
    """The files a simple command edits when it is `sed` in place (`-i`, `-i.bak`,
    `--in-place`): its operands after the script, or all of them when `-e` or `-f` gave
    it."""
    if not words or words[0].rsplit("/", 1)[-1] != "sed":
        return []
    in_place = scripted = False
    operands: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "--":
            operands += rest
        elif word.startswith("--"):
            in_place = in_place or word.startswith("--in-place")
            if word in ("--expression", "--file"):
                next(rest, None)  # (its value)
            scripted = scripted or word.startswith(("--expression", "--file"))
        elif word.startswith("-") and len(word) > 1:
            for at, flag in enumerate(word[1:], 1):
                if flag == "i":
                    in_place = True
                    break  # (what follows is the backup's suffix)
                if flag in "efl":  # each takes a value: the rest of the word, or the next
                    if at == len(word) - 1:
                        next(rest, None)
                    scripted = scripted or flag != "l"
                    break
        else:
            operands.append(word)
    if not in_place:
        return []
    return operands if scripted else operands[1:]


def _worked(command: str, outcome: list[Observation]) -> bool | None:
    """Whether a command that succeeded did something (True) or only read (False); None when
    it failed or its outcome did not leave."""
    if not outcome or any(seen.failed for seen in outcome):
        return None
    first = command.split(maxsplit=1)[0] if command.strip() else ""
    reads = first in _READ_ONLY or "sed -n" in command
    return not (reads or command.startswith(("git status", "git diff", "git log", "git show")))


def _preserved(
    history: _History, artifacts: Sequence[str], before: dict[str, str], ours: bool
) -> list[str]:
    """The files edited or created and the commands that worked, newest first, and the
    offloaded files (the compressor passes its whole trail, newest first)."""
    files: list[str] = []
    worked: list[str] = []
    looked: list[str] = []  # reads and searches that worked: listed after the others
    for read, (index, msg) in enumerate(history.newest("assistant")):
        if read == _READ_BACK or (len(files) >= _FILES and len(worked) >= _COMMANDS):
            break
        commands = history.commands(index)
        for call in reversed(msg.tool_calls):
            files += reversed(_edited(call))
        for command in reversed(commands):
            files += reversed(_edited(command))
        if commands and len(worked) < _COMMANDS:
            kind = _worked(commands[-1], history.outcome(index))
            if kind is not None:
                (worked if kind else looked).append(_one_line(commands[-1], _ITEM_CHARS))
    offloaded = list(artifacts)
    if ours:
        earlier = before["context_to_preserve"]
        files += _section(earlier, "Files edited or created")
        worked += _section(earlier, "Commands that worked")
        offloaded += _section(earlier, "Offloaded files")
    return [
        *_listed("Files edited or created", _unique((_one_line(f, 160) for f in files), _FILES)),
        *_listed("Commands that worked", _unique([*worked, *looked], _COMMANDS)),
        *_listed("Offloaded files", _unique(offloaded, len(offloaded), files=True)),
    ]
