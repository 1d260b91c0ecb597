"""The deterministic reader: an OpenAI-compatible model for `ctxoffload eval`'s tests that
answers a probe only from what is in the messages it is sent.

Given tools, and a notice or summary in the messages that names the file holding what the
question is about, it calls Read or Grep once, as a careful agent would, then answers from
the messages and the tool's result (a tool message, or a user turn as smolagents sends one).
It never sees the workspace any other way.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from openai_server import chat_completion

__all__ = ["answer_as_reader", "judge_strictly"]

_ERROR = r"\b(?:ERROR|FATAL|Traceback|[A-Z]\w*(?:Error|Exception))\b"
_EXIT = re.compile(
    r"(?:<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\b(?:exit(?:ed)?(?: with)?(?: code| status)|return ?code|returncode)\b[:= ]+(-?\d+))",
    re.IGNORECASE,
)
_UNKNOWN = "I do not know."
_BASH = re.compile(r"```(?:bash|sh|shell)\n(.+?)\n```", re.DOTALL)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _call_id(question: str) -> str | None:
    found = re.search(r"tool call (\S+?)[ ?]", question)
    return found.group(1) if found else None


def _line(question: str) -> int | None:
    found = re.search(r"\(line (\d+) of", question)
    return int(found.group(1)) if found else None


class _Seen:
    """What the messages hold: every text, the calls' arguments, the results by call."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.texts: list[str] = []
        self.arguments: dict[str, dict[str, Any]] = {}
        self.results: dict[str, list[str]] = {}
        for message in messages:
            text = _text(message.get("content"))
            self.texts.append(text)
            for call in message.get("tool_calls") or []:
                with contextlib.suppress(KeyError, ValueError):
                    self.arguments[call["id"]] = json.loads(call["function"]["arguments"])
            if message.get("role") == "tool":
                self.results.setdefault(str(message.get("tool_call_id")), []).append(text)
        self.blob = "\n".join(self.texts)
        self.messages = messages

    def mine(self, keep: Any) -> list[tuple[str, str]]:
        """The agent's messages whose text `keep` accepts, in order, each with the text of
        the message after it."""
        found = []
        for index, message in enumerate(self.messages):
            text = _text(message.get("content"))
            if message.get("role") == "assistant" and keep(text):
                after = self.messages[index + 1] if index + 1 < len(self.messages) else {}
                found.append((text, _text(after.get("content"))))
        return found

    def about(self, call: str) -> list[str]:
        """Lines of `call`'s result: its tool message, or Grep's lines from its stored file."""
        lines = [row for text in self.results.get(call, []) for row in text.splitlines()]
        prefix = re.compile(r"^\S*tool_result-" + re.escape(call) + r"\.txt:\d+[:-]")
        for row in self.blob.splitlines():
            if prefix.match(row):
                lines.append(prefix.sub("", row))
        return lines

    def arguments_of(self, call: str) -> dict[str, Any]:
        """`call`'s arguments: from the tool calls it is sent, else from the rows a Read or a
        Grep of context.jsonl showed of it (`-> tool call NAME (id CALL)`, then a row per
        argument, a list's items a row each)."""
        if call in self.arguments:
            return self.arguments[call]
        found: dict[str, Any] = {}
        taking = False
        rows = [
            part
            for line in self.blob.splitlines()
            # Read's numbered rows, or Grep's lines (a message whole: its rows joined by ⏎)
            for part in re.sub(r"^(?:\S*context\.jsonl[-:]\d+[-:]|\s*\d*\t)", "", line).split(" ⏎ ")
        ]
        for row in rows:
            if re.match(r"^\s*-> tool call \S+ \(id " + re.escape(call) + r"\)", row):
                taking, found = True, {}
            elif taking and (pair := re.match(r"^\s+(\w+)(\[\d+\])?: (.*)$", row)):
                if pair.group(2):
                    found.setdefault(pair.group(1), []).append(pair.group(3))
                else:
                    found[pair.group(1)] = pair.group(3)
            elif taking:
                break
        return found

    def context_line(self, number: int) -> str:
        """The text Read showed of line `number` of context.jsonl (numbered rows and the
        rows that continue them)."""
        rows: list[str] = []
        taking = False
        for row in self.blob.splitlines():
            head = re.match(r"^\s*(\d+)\t", row)
            if head:
                taking = int(head.group(1)) == number
            elif not re.match(r"^\s+\t", row):
                taking = False
            if taking:
                rows.append(row.split("\t", 1)[1])
        return "\n".join(rows)

    def file(self, pattern: str) -> str | None:
        # A path, or a store's URL (s3://bucket/..., sqlite:////folder/agents.db/...).
        found = re.findall(r"((?:[a-z][a-z0-9+.-]*:/)?/[^\s'\"()<>]*" + pattern + r")", self.blob)
        return found[0] if found else None

    def span(self) -> tuple[int, int] | None:
        found = re.findall(r"context\.jsonl \(lines (\d+)-(\d+)\)", self.blob)
        return (int(found[-1][0]), int(found[-1][1])) if found else None


def _reading(question: str, seen: _Seen) -> dict[str, Any] | None:
    """The one call a careful agent makes for `question`, or None to answer at once."""
    context = seen.file(r"context\.jsonl")
    call, line = _call_id(question), _line(question)
    if (call is not None and "error line" in question) or "exit status did tool" in question:
        stored = seen.file(r"tool_result-" + re.escape(call) + r"\.txt")
        pattern = _ERROR if "error line" in question else r"(?i)exit|returncode"
        return (
            {"name": "Grep", "arguments": {"pattern": pattern, "path_or_glob": stored}}
            if (stored)
            else None
        )
    if call is not None and (key := re.search(r"value of `(\w+)`", question)):
        stored = seen.file(r"tool_result-" + re.escape(call) + r"\.txt")
        if stored:
            return {
                "name": "Grep",
                "arguments": {"pattern": f'"{key.group(1)}"', "path_or_glob": stored},
            }
        return None
    if context is None:
        return None
    asks_an_argument = "did the agent pass" in question or "What command did the agent" in question
    if call is not None and asks_an_argument and call not in seen.arguments:
        return {
            "name": "Grep",
            "arguments": {"pattern": re.escape(call), "path_or_glob": context, "context_lines": 8},
        }
    if line is not None:
        return {"name": "Read", "arguments": {"path": context, "offset": line, "limit": 2}}
    if question.startswith("What task"):
        return {"name": "Read", "arguments": {"path": context, "offset": 1, "limit": 3}}
    span = seen.span()
    if question.startswith("What was your last step") and span is not None:
        first = max(span[0], span[1] - 3)
        return {
            "name": "Read",
            "arguments": {"path": context, "offset": first, "limit": span[1] - first + 1},
        }
    return None


def _nth(question: str, what: str) -> int | None:
    found = re.search(r"the (\d+)(?:st|nd|rd|th) " + what, question)
    return int(found.group(1)) if found else None


def _about_a_message(question: str, seen: _Seen, line: int) -> str:
    """A question about one of the agent's messages: from Read's lines of context.jsonl when
    it read them, else counted among the agent's messages it is sent."""
    shell, spoken = _nth(question, "shell command"), _nth(question, "of your messages")
    message, following = seen.context_line(line), seen.context_line(line + 1)
    if not message:
        mine = seen.mine(lambda text: bool(_BASH.search(text)) if shell else bool(text.strip()))
        number = shell or spoken
        if number is None or number > len(mine):
            return _UNKNOWN
        message, following = mine[number - 1]
    if shell and "exit status" in question:
        found = _EXIT.search(following)
        return (found.group(1) or found.group(2)) if found else _UNKNOWN
    if shell:
        found = _BASH.search(message)
        return found.group(1).strip() if found else _UNKNOWN
    rows = [row for row in message.splitlines() if row.strip()]
    if seen.context_line(line):
        rows = rows[1:]  # Read's first row names the role
    return rows[0] if rows else _UNKNOWN


def _answer(question: str, seen: _Seen) -> str:
    call, line = _call_id(question), _line(question)
    if "error line" in question and call is not None:
        errors = [row.strip() for row in seen.about(call) if re.search(_ERROR, row)]
        if not errors:
            return _UNKNOWN
        if question.startswith("Quote"):
            return errors[0]
        prefix = re.search(r"Which (\w+)- identifier", question)
        found = prefix and re.search(r"\b" + prefix.group(1) + r"-\d{2,}\b", errors[0])
        return found.group(0) if found else _UNKNOWN
    if (key := re.search(r"value of `(\w+)`", question)) and call is not None:
        for row in seen.about(call):
            found = re.search(r'"' + key.group(1) + r'"\s*:\s*(-?[\d.]+)', row)
            if found:
                return found.group(1)
        return _UNKNOWN
    if "exit status did tool" in question and call is not None:
        for row in seen.about(call):
            found = _EXIT.search(row)
            if found:
                return found.group(1) or found.group(2)
        return _UNKNOWN
    if (asked := re.search(r"What `(\w+)` did the agent pass to", question)) and call:
        return str(seen.arguments_of(call).get(asked.group(1), _UNKNOWN))
    if question.startswith("What command did the agent run") and call:
        arguments = seen.arguments_of(call)
        command = next((v for k, v in arguments.items() if k in ("command", "cmd")), _UNKNOWN)
        if isinstance(command, list):  # ["bash", "-lc", "script"]: the script
            command = command[-1] if len(command) == 3 and "c" in command[1] else " ".join(command)
        return str(command)
    if line is not None:
        return _about_a_message(question, seen, line)
    if question.startswith("What task"):
        said = [t for t in seen.texts[:-1] if t and not t.lstrip().startswith("<")]
        return said[0] if said else _UNKNOWN
    if question.startswith("What was your last step"):
        return _last_step(seen)
    return _UNKNOWN


def _last_step(seen: _Seen) -> str:
    """The agent's last step in the rows Read showed of context.jsonl: what it said, then the
    last tool it called and with what."""
    rows = [r.split("\t", 1)[1] for r in seen.blob.splitlines() if re.match(r"^\s*\d*\t", r)]
    starts = [i for i, r in enumerate(rows) if r.startswith("[assistant]")]
    if not starts:
        return _UNKNOWN
    said: list[str] = []
    call: str | None = None
    arguments: dict[str, Any] = {}
    for row in rows[starts[-1] + 1 :]:
        if re.match(r"^\[\w+\]", row):
            break
        found = re.match(r"^-> tool call (\S+) \(id", row)
        if found:
            call, arguments = found.group(1), {}
        elif call is not None and (pair := re.match(r"^  (\w+)(\[\d+\])?: (.*)$", row)):
            if pair.group(2):  # a list's items, one row each: `command[0]: bash`
                arguments.setdefault(pair.group(1), []).append(pair.group(3))
            else:
                arguments[pair.group(1)] = pair.group(3)
        elif call is None and row.strip():
            said.append(row.strip())
    text = " ".join(said)
    if call is None:
        return text or _UNKNOWN
    step = f"called {call} with {json.dumps(arguments, ensure_ascii=False)}"
    return f"{text} Then {step}" if text else step


def _summary(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A terse summary, when `messages` ask for one: the reader keeps the first thing the
    conversation says and the last, and nothing between (a lossy summariser: every path,
    command and number in the middle is gone)."""
    blob = "\n".join(_text(m.get("content")) for m in messages)
    if "You are compressing the earlier part of a conversation" in blob:  # ctxoffload's
        said = blob.split("<conversation>", 1)[-1].rsplit("</conversation>", 1)[0]
        rows = [r.strip() for r in said.splitlines() if r.strip()]
        fields = {
            "task_overview": rows[0][:200] if rows else "none",
            "current_state": rows[-1][:200] if rows else "none",
            "important_discoveries": "none",
            "next_steps": "none",
            "context_to_preserve": "none",
        }
        return chat_completion(json.dumps(fields), usage=(len(blob) // 4, 80))
    if "<conversation>" in blob:  # the `langchain` strategy's request
        said = blob.split("<conversation>", 1)[1].rsplit("</conversation>", 1)[0]
        rows = [r.strip() for r in said.splitlines() if r.strip()]
        first = next((r for r in rows if r.startswith("[user]")), rows[0] if rows else "")
        last = next((r for r in reversed(rows) if r.startswith("[assistant]")), "")
        return chat_completion(f"{first[:200]}\n{last[:200]}", usage=(len(blob) // 4, 60))
    return None


def judge_strictly(body: Any) -> dict[str, Any]:
    """A judge for the tests: CORRECT when the agent's answer is the reference answer, after
    normalising whitespace and case; INCORRECT otherwise, with its reason."""
    prompt = _text((body.get("messages") or [{}])[-1].get("content"))
    reference = re.search(r"Reference answer \(from the record\): (.*?)\n\nThe agent", prompt, re.S)
    given = re.search(r"The agent's answer: (.*?)\n\nGrade it", prompt, re.S)
    if reference is None or given is None:
        return chat_completion("INCORRECT\nno rubric found", usage=(len(prompt) // 4, 4))
    same = " ".join(reference.group(1).lower().split()) == " ".join(given.group(1).lower().split())
    verdict = "CORRECT\nThe same as the reference." if same else "INCORRECT\nNot the reference."
    return chat_completion(verdict, usage=(len(prompt) // 4, 8))


def answer_as_reader(body: Any) -> dict[str, Any]:
    """A chat completion answering the request `body` as the reader (the server's
    `responder`): a probe from what its messages hold, a summary when asked for one, a
    verdict (`judge_strictly`) when the model asked is named `judge`."""
    messages = body.get("messages") or []
    if body.get("model") == "judge":
        return judge_strictly(body)
    summary = _summary(messages)
    if summary is not None:
        return summary
    asked = [
        index
        for index, m in enumerate(messages)
        if m.get("role") == "user" and "Question: " in _text(m.get("content"))
    ]
    if not asked:
        return chat_completion(_UNKNOWN, usage=(100, 3))
    question = _text(messages[asked[-1]].get("content")).split("Question: ", 1)[1]
    seen = _Seen(messages)
    prompt = sum(len(t) for t in seen.texts) // 4
    tools = {t["function"]["name"] for t in body.get("tools") or []}
    # It reads once per question: a turn of its own after the question is that read, its
    # result after it as a tool message or, as smolagents' models send an observation, as
    # the user's turn.
    has_read = any(m.get("role") == "assistant" for m in messages[asked[-1] + 1 :])
    if tools and not has_read:
        reading = _reading(question, seen)
        if reading is not None and reading["name"] in tools:
            call = {
                "id": "read_1",
                "type": "function",
                "function": {
                    "name": reading["name"],
                    "arguments": json.dumps(reading["arguments"]),
                },
            }
            return chat_completion(None, tool_calls=[call], usage=(prompt, 20))
    answer = _answer(question, seen)
    return chat_completion(answer, usage=(prompt, max(1, len(answer) // 4)))
