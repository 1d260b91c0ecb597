"""Claude Code's hooks on a ctxoffload workspace: what `ctxoffload hook <event>` and the Claude
Agent SDK's callbacks (`ctxoffload.integrations.claude`) do with the hook input both receive
(the same JSON object; Claude Code's hooks reference, https://code.claude.com/docs/en/hooks).

- `post_tool_use`: a tool output over the config's `tool_result_limit` is stored whole
  (`sessions/<session>/tool_result-<tool_use_id>.txt`) and replaced by its head and a notice
  naming the file, in the tool's own output shape (`updatedToolOutput`: Claude Code ignores a
  replacement of a built-in tool whose shape differs).
- `pre_compact`: every message of the transcript not yet in the session's context.jsonl is
  appended there, and the artifact index of what the compaction drops is built; both are
  recorded in a `host_compaction` event.
- `session_start`: after a compaction (`source` "compact"), that event's text (where the
  history is, and the index) as `additionalContext`.

The session is named after Claude Code's `session_id` (`session_id_for`). Bad input raises
`InvalidContent` naming the field; nothing is written then.
"""

from __future__ import annotations

import errno
import functools
import json
import os
from collections.abc import Mapping, Sequence

from .._depth import TooDeep, load_json
from .._disk.events import EventKind
from .._disk.ids import session_id_for
from .._disk.layout import MARK
from .._disk.paths import READ_FLAGS, verify_file
from .._disk.wording import plural, spans_text
from .._tokens.bounds import within_bytes
from ..exceptions import InvalidContent, OffloadError

TYPE_CHECKING = False  # `typing` costs every hook's start-up, which runs on every tool call
if TYPE_CHECKING:
    from typing import Any

    from ..compression import ContextConfig
    from ..messages import Msg
    from ..workspace import Workspace

# The engine (compression, the message model, pydantic) is imported where it is used: a hook
# runs as a new process on every tool call, and most outputs are small enough to be answered
# before it loads (`needs_offload`).

__all__ = [
    "DEFAULT_TOOL_RESULT_LIMIT",
    "HOOK_EVENTS",
    "HOST",
    "announce",
    "compaction_context",
    "dumps_output",
    "hook_config",
    "hook_session",
    "hook_settings",
    "needs_offload",
    "post_tool_use",
    "pre_compact",
    "read_transcript",
    "session_start",
]

HOST = "claude-code"
"""The host a `host_compaction` event names."""

DEFAULT_TOOL_RESULT_LIMIT = 3000
"""Tokens of a tool output above which PostToolUse stores it (`ContextConfig`'s default)."""


@functools.cache
def hook_config(tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT) -> ContextConfig:
    """The `ContextConfig` of Claude Code's hooks: its models' 200,000-token window, the tool
    output limit, and an artifact index of at most 1,200 tokens, so that what `session_start`
    returns stays under the 10,000 characters Claude Code takes of a hook's
    `additionalContext` inline (it saves a longer one to a file)."""
    from ..compression import ContextConfig

    return ContextConfig(
        context_window=200_000, tool_result_limit=tool_result_limit, artifact_index_tokens=1_200
    )


MAX_TRANSCRIPT_BYTES = 1 << 30
"""The largest transcript `read_transcript` reads (Claude Code's are megabytes)."""

MAX_PERSISTED_OUTPUT_BYTES = 256 << 20
"""The largest output file Claude Code persisted for a tool that `post_tool_use` reads back
(it cuts its own copies at 64 MiB)."""

# Fields of a tool output that hold a binary payload (base64), never offloaded as text: MCP
# image and audio content (`data`), an embedded resource's `blob`, Read's image `base64`.
_PAYLOAD_KEYS = frozenset({"data", "blob", "base64"})
_BINARY_TYPES = frozenset({"image", "audio"})
_MAX_WALK = 64  # levels of an output walked for its text; deeper text stays as it is


def _field(hook_input: Mapping[str, Any], name: str, event: str) -> str:
    """A required string field of the hook input.

    Raises:
        InvalidContent: it is missing, not a string, or empty.
    """
    value = hook_input.get(name)
    if not isinstance(value, str) or not value:
        got = "nothing" if value is None else f"{type(value).__name__} {_shown(value)}"
        raise InvalidContent(
            f"the {event} hook input has no {name!r} string (got {got}): Claude Code sends "
            f"one with every {event} event; check what the hook is fed"
        )
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def hook_session(hook_input: Mapping[str, Any], event: str) -> str:
    """The workspace session of a hook input: Claude Code's `session_id` when it is a plain
    name, else a safe name of its own (`session_id_for`), never a path.

    Raises:
        InvalidContent: the input is not a JSON object or has no `session_id` string.
    """
    if not isinstance(hook_input, Mapping):
        raise InvalidContent(
            f"the {event} hook input is a JSON {type(hook_input).__name__}, not an object: "
            "Claude Code sends one JSON object on stdin"
        )
    return session_id_for(_field(hook_input, "session_id", event))


async def announce(workspace: Workspace, session: str, door: str, conversation: object) -> None:
    """Record the `door` event of a session the hooks are about to write first. A hook is a
    short process of its own, so "first" is read from the record: a session with no event."""
    from .doors import DOORS
    from .runs import record_door

    if not await workspace.read_events(session):
        await record_door(workspace, DOORS[door], session, conversation)


# -- PostToolUse ------------------------------------------------------------------------------


async def post_tool_use(
    workspace: Workspace,
    hook_input: Mapping[str, Any],
    *,
    config: ContextConfig | None = None,
    door: str = HOST,
) -> dict[str, Any]:
    """The PostToolUse hook's output for `hook_input`: `{}` when the tool's output fits the
    limit (or is one the agent reads offloaded content back with: Read, Grep, Glob), else the
    output with each text over the limit replaced by its head and the notice naming the file
    that holds it whole (`updatedToolOutput`, and `updatedMCPToolOutput` for an MCP tool, the
    field Claude Code before 2.1.121 reads).

    Raises:
        InvalidContent: the input lacks `session_id`, `tool_name`, `tool_use_id` or
            `tool_response`.
        OffloadError: the workspace could not store the output (the caller leaves the output
            as it was).

    `door` names the door the hook runs behind (`claude-code`, `claude-agent-sdk`), for the
    `door` event that opens a session it writes first.
    """
    session = hook_session(hook_input, "PostToolUse")
    tool_name = _field(hook_input, "tool_name", "PostToolUse")
    tool_use_id = _field(hook_input, "tool_use_id", "PostToolUse")
    if "tool_response" not in hook_input:
        raise InvalidContent(
            "the PostToolUse hook input has no 'tool_response': Claude Code sends the tool's "
            "output there; check what the hook is fed"
        )
    from .._tokens.counters import fits_by_size
    from ..compression import Compressor, Projector
    from ..messages import ToolResultBlock

    response = _whole_output(hook_input["tool_response"])
    cfg = config or hook_config()
    projector = Projector(workspace, session, config=cfg)  # (nothing read or written yet)
    limit = cfg.tool_result_limit
    texts = [
        leaf
        for leaf in _text_leaves(response)
        if not fits_by_size(projector.counter, leaf[1], limit)
    ]
    if not texts:
        return {}
    if Compressor(cfg).reads_back(tool_name):
        return {}  # Read, Grep, Glob read offloaded files back: cutting them again would loop
    await announce(workspace, session, door, hook_input["session_id"])
    replaced = response
    changed = False
    for number, (path, text) in enumerate(sorted(texts, key=lambda leaf: -len(leaf[1]))):
        block_id = tool_use_id if number == 0 else f"{tool_use_id}.{'.'.join(map(str, path))}"
        block = ToolResultBlock(id=block_id, name=tool_name, output=text)
        kept = await projector.offload_tool_result(block)
        if isinstance(kept.output, str) and kept.output != text:
            replaced = _with_leaf(replaced, path, kept.output)
            changed = True
    if not changed:
        return {}
    output: dict[str, Any] = {"hookEventName": "PostToolUse", "updatedToolOutput": replaced}
    if tool_name.startswith("mcp__"):
        output["updatedMCPToolOutput"] = replaced
    return {"hookSpecificOutput": output}


def needs_offload(hook_input: Any, tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT) -> bool:
    """Whether a PostToolUse input may hold an output to store: one of its texts is longer
    than `tool_result_limit` bytes in UTF-8 (the hook counts with o200k, whose tokens hold a
    byte at least: `within_bytes`), or Claude Code persisted the output itself. False
    answers the hook at once, before the engine is loaded.

    Raises:
        InvalidContent: the input lacks `tool_name` or `tool_use_id` (as `post_tool_use`).
    """
    if not isinstance(hook_input, Mapping):
        return True  # `post_tool_use` says what is wrong with it
    for name in ("tool_name", "tool_use_id"):
        _field(hook_input, name, "PostToolUse")
    if "tool_response" not in hook_input:
        return True  # `post_tool_use` says what is wrong with it
    response = hook_input.get("tool_response")
    if isinstance(response, dict) and "persistedOutputPath" in response:
        return True
    return any(not within_bytes(text, tool_result_limit) for _, text in _text_leaves(response))


def _whole_output(response: Any) -> Any:
    """The tool's output, whole: where Claude Code persisted a long Bash output itself and
    sent the hook its start (`persistedOutputPath`), the output read back from that file, and
    without the fields that would have Claude Code show its own copy instead."""
    if not isinstance(response, dict):
        return response
    persisted = response.get("persistedOutputPath")
    if not isinstance(persisted, str) or not isinstance(response.get("stdout"), str):
        return response
    try:
        whole = _read_plain_file(persisted, MAX_PERSISTED_OUTPUT_BYTES, "persistedOutputPath")
    except InvalidContent:
        return response  # its start is all there is to store: Claude Code keeps the rest
    out = {
        k: v for k, v in response.items() if k not in ("persistedOutputPath", "persistedOutputSize")
    }
    out["stdout"] = whole.decode("utf-8", "surrogateescape")
    return out


def _text_leaves(value: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """The texts of a tool output with where each is: the output itself when it is a string,
    else every string inside it (iteratively, at most `_MAX_WALK` levels deep) except
    binary payloads (an image's base64)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            found.append((path, item))
        elif len(path) >= _MAX_WALK:
            continue
        elif isinstance(item, dict):
            if item.get("type") in _BINARY_TYPES:
                continue
            stack.extend(
                ((*path, key), child)
                for key, child in item.items()
                if isinstance(key, str) and key not in _PAYLOAD_KEYS
            )
        elif isinstance(item, list):
            stack.extend(((*path, i), child) for i, child in enumerate(item))
    return found


def _with_leaf(value: Any, path: tuple[str | int, ...], text: str) -> Any:
    """A copy of `value` with the string at `path` replaced by `text` (the rest shared)."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _with_leaf(value[head], rest, text)}
    copy = list(value)
    copy[head] = _with_leaf(copy[head], rest, text)  # type: ignore[index]
    return copy


# -- PreCompact -------------------------------------------------------------------------------


def read_transcript(path: str) -> list[Any]:
    """The records of a Claude Code transcript (JSONL), read without following a link; a line
    that is not JSON (the last one, torn while Claude Code writes it) is skipped.

    Raises:
        InvalidContent: the path is not absolute, does not end in `.jsonl`, does not exist,
            is a symbolic link, a FIFO, a device or a directory, or is over 1 GiB.
    """
    if not os.path.isabs(path) or not path.endswith(".jsonl"):
        raise InvalidContent(
            f"transcript_path {_shown(path)} is not an absolute path to a .jsonl file: "
            "Claude Code names its session transcript (~/.claude/projects/.../<session>.jsonl)"
        )
    data = _read_plain_file(path, MAX_TRANSCRIPT_BYTES, "transcript_path")
    rows: list[Any] = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(load_json(line))
        except (TooDeep, ValueError):
            continue
    return rows


def _read_plain_file(path: str, limit: int, field: str) -> bytes:
    """The bytes of a regular file named by a hook input's `field`, opened without following
    a link at its last component and checked on the open descriptor.

    Raises:
        InvalidContent: naming the field and what is wrong with the file.
    """
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        raise InvalidContent(f"{field} {_shown(path)} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidContent(
                f"{field} {_shown(path)} is a symbolic link: Claude Code writes a plain file "
                "there, and a link is not followed"
            ) from None
        raise InvalidContent(f"{field} {_shown(path)} cannot be opened: {exc.strerror}") from None
    try:
        try:
            size = verify_file(fd, path).st_size
        except OffloadError as exc:
            raise InvalidContent(f"{field} {_shown(path)}: {exc}") from None
        if size > limit:
            raise InvalidContent(
                f"{field} {_shown(path)} is {size:,} bytes, over the {limit:,} read"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            limit -= len(chunk)
            if limit < 0:
                raise InvalidContent(f"{field} {_shown(path)} grew past the size read")
        return b"".join(chunks)
    finally:
        os.close(fd)


async def pre_compact(
    workspace: Workspace,
    hook_input: Mapping[str, Any],
    *,
    config: ContextConfig | None = None,
    door: str = HOST,
) -> dict[str, Any]:
    """Keep what Claude Code's compaction is about to drop: every message of the transcript
    not yet in the session's context.jsonl is appended there (running again on the same or a
    longer transcript appends only what is new), and the artifact index of the messages since
    the last compaction is built; a `host_compaction` event records both, with the text
    `session_start` returns after the compaction. Returns `{}`: the compaction goes on.

    Raises:
        InvalidContent: the input lacks `session_id` or `transcript_path`, or the transcript
            cannot be read (`read_transcript`).
        OffloadError: the workspace could not append the messages.
    """
    from .._disk.events import HostCompaction
    from ..compression import Compressor
    from ..formats.claude_code import after_last_compaction, from_claude_code
    from ..tokens import get_token_counter

    session = hook_session(hook_input, "PreCompact")
    path = _field(hook_input, "transcript_path", "PreCompact")
    rows = read_transcript(path)
    messages = from_claude_code(rows)
    if not messages:
        return {}
    leaving = from_claude_code(after_last_compaction(rows))
    await announce(workspace, session, door, hook_input["session_id"])
    cfg = config or hook_config()
    compressor = Compressor(
        cfg, offloader=workspace, session_id=session, counter=get_token_counter(None)
    )
    before = len(await workspace.read_context(session))
    persisted = await compressor.persist(messages, on_failure="the compaction goes on without them")
    if persisted.failure is not None:
        raise OffloadError(f"could not append the transcript's messages: {persisted.failure}")
    segment = leaving[0].id if leaving else ""
    earlier = _earlier_index(await _last_compaction(workspace, session), segment)
    note = _compaction_note(len(messages), persisted.reference, persisted.spans)
    note, fidelity = await compressor.index_note(
        note, leaving, persisted, earlier=earlier, summary_text="", kept=[]
    )
    appended = len(await workspace.read_context(session)) - before
    trigger = hook_input.get("trigger")
    await compressor.event(
        HostCompaction(
            host=HOST,
            trigger=trigger if isinstance(trigger, str) else None,
            transcript=path,
            reference=persisted.reference,
            lines=persisted.lines,
            **persisted.apart,
            messages=len(messages),
            appended=appended,
            context=note.text,
            mark=note.metadata.get(MARK),
            segment=segment,
            earlier=earlier,
            **fidelity,
        )
    )
    return {}


def _earlier_index(last: dict[str, Any] | None, segment: str) -> dict[str, Any]:
    """The index state this compaction carries on: the last compaction's, or, when the last
    one was of this same stretch of the transcript (the hook run again before Claude Code
    compacted), what that one carried on, so nothing is counted twice."""
    if last is None:
        return {}
    mark = last.get("earlier") if last.get("segment") == segment else last.get("mark")
    return mark if isinstance(mark, dict) else {}


def _compaction_note(messages: int, reference: str | None, spans: Sequence[tuple[int, int]]) -> Msg:
    """What the context after the compaction is told of where the history went, exactly the
    lines that hold it (the index of its artifacts follows it)."""
    from ..messages import Msg

    where = f" (lines {spans_text(spans)})" if spans else ""
    text = (
        f"[Claude Code compacted this conversation. {plural(messages, 'message')} of it, "
        f"the summarised part included, are kept whole in {reference}{where}, one JSON "
        "message per line: search that file with your Grep tool and read the lines around a "
        "match with your Read tool when you need something the summary left out.]"
    )
    return Msg(role="user", content=text, metadata={MARK: {"kind": EventKind.HOST_COMPACTION}})


async def _last_compaction(workspace: Workspace, session: str) -> dict[str, Any] | None:
    """The session's latest `host_compaction` event, if any."""
    for event in reversed(await workspace.read_events(session)):
        if event.get("kind") == EventKind.HOST_COMPACTION and event.get("host") == HOST:
            return dict(event)
    return None


# -- SessionStart -----------------------------------------------------------------------------


async def compaction_context(workspace: Workspace, session: str) -> str | None:
    """The text the context after the session's latest compaction gets (where the history
    is, and the artifact index), or None when no compaction was recorded."""
    event = await _last_compaction(workspace, session)
    text = event.get("context") if event else None
    return text if isinstance(text, str) and text else None


async def session_start(workspace: Workspace, hook_input: Mapping[str, Any]) -> dict[str, Any]:
    """The SessionStart hook's output: after a compaction (`source` "compact"), the text
    `pre_compact` recorded as `additionalContext`; `{}` for any other start, or when no
    compaction was recorded.

    Raises:
        InvalidContent: the input lacks `session_id`.
    """
    session = hook_session(hook_input, "SessionStart")
    if hook_input.get("source") != "compact":
        return {}
    text = await compaction_context(workspace, session)
    if text is None:
        return {}
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


def dumps_output(output: Mapping[str, Any]) -> str:
    """A hook's output as the one line of JSON Claude Code reads from stdout: ASCII only, so
    a lone surrogate (bytes of a tool output that were not UTF-8) travels as an escape."""
    return json.dumps(output, ensure_ascii=True, separators=(",", ":"))


HOOK_EVENTS = ("PostToolUse", "PreCompact", "SessionStart")
"""The Claude Code events `ctxoffload hook` handles."""


def hook_settings(command: str = "ctxoffload") -> dict[str, Any]:
    """The `hooks` of a Claude Code settings file (or a plugin's hooks/hooks.json) that run
    `ctxoffload hook` on its three events: every tool's output, every compaction, and the
    session start after one (matcher `compact`). `command` is how the shell finds ctxoffload
    (with `--workdir DIR` after it, when given)."""

    def run(event: str) -> list[dict[str, Any]]:
        return [{"type": "command", "command": f"{command} hook {event}"}]

    return {
        "hooks": {
            "PostToolUse": [{"matcher": "*", "hooks": run("PostToolUse")}],
            "PreCompact": [{"matcher": "manual|auto", "hooks": run("PreCompact")}],
            "SessionStart": [{"matcher": "compact", "hooks": run("SessionStart")}],
        }
    }
