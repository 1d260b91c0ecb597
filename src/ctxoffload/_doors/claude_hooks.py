"""Claude Code's hooks on a ctxoffload workspace: what `ctxoffload hook <event>` and the Claude
Agent SDK's callbacks (`ctxoffload.integrations.claude`) do with the hook input both receive
(the same JSON object; Claude Code's hooks reference, https://code.claude.com/docs/en/hooks).

- `post_tool_use`: a tool output over the config's `tool_result_limit` (measured as Claude is
  sent it: its texts together and its field names, numbers and brackets) is stored whole
  (`sessions/<session>/tool_result-<tool_use_id>.txt`) and replaced by its head and a notice
  naming the file, in the tool's own output shape (`updatedToolOutput`: Claude Code ignores a
  replacement of a built-in tool whose shape differs); an output whose structure alone is
  over a quarter of the limit is stored as its JSON and replaced by text.
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
from ..exceptions import InvalidContent, OffloadError

TYPE_CHECKING = False  # `typing` costs every hook's start-up, which runs on every tool call
if TYPE_CHECKING:
    from typing import Any

    from ..compression import ContextConfig
    from ..messages import Msg
    from ..tokens import TokenCounter
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
_Path = tuple[str | int, ...]  # where a text is in a tool output: its keys and indexes


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
    from .opening import record_door

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
    limit, measured as Claude is sent it (its texts together and `_shape`: field names,
    numbers, brackets), or is one the agent reads offloaded content back with (Read, Grep,
    Glob); for an output whose shape alone is over a quarter of the limit, its JSON stored
    whole and the output replaced by that file's head and notice (`_store_structured`); else
    the output with its texts stored whole in one file, one after another
    (the shortest, up to a quarter of the limit together, stay as they are), the first
    replaced by the file's head and the notice naming it and the others taken out
    (`updatedToolOutput`, and `updatedMCPToolOutput` for an MCP tool, the field Claude Code
    before 2.1.121 reads).

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
    from ..tokens import get_token_counter

    response = _whole_output(tool_name, hook_input["tool_response"])
    cfg = config or hook_config()
    limit = cfg.tool_result_limit
    counter = get_token_counter(None)  # the Projector's
    leaves = _text_leaves(response)
    # The output is measured as Claude is sent it: its texts, and its field names, numbers and
    # brackets (`_shape`): a custom tool's dict of 5,000 short fields once reached Claude at
    # 21,946 tokens, its texts alone under the limit.
    shape = _shape(response)
    sent = "\n".join([*(text for _, text in leaves), shape])
    if fits_by_size(counter, sent, limit):
        return {}  # (most outputs: no tokenizer needed)
    if Compressor(cfg).reads_back(tool_name):
        return {}  # Read, Grep, Glob read offloaded files back: cutting them again would loop
    shape_tokens = counter.count_text(shape) if shape else 0
    if shape_tokens > limit // 4:
        if counter.count_text(sent) <= limit:
            return {}  # within the limit once counted
        return await _store_structured(
            workspace, hook_input, response, session, cfg, door=door, tool_name=tool_name
        )
    kept, rest = _kept_whole(leaves, limit // 4, counter)
    rest += shape_tokens
    stored = [leaf for leaf in leaves if leaf[0] not in kept]
    if not stored:
        return {}  # within the limit once counted
    text = "\n".join(leaf_text for _, leaf_text in stored)
    # The output is measured whole, and what Claude gets of it is one preview within what the
    # texts kept whole leave of the limit: the stored texts go to one file, one after another,
    # the first replaced by the head of that file and its notice (an output of 60 texts each
    # under the limit once reached Claude whole, 174,000 tokens).
    budget = limit - rest
    if budget != limit:
        preview = None if cfg.preview_tokens is None else min(cfg.preview_tokens, budget)
        cfg = cfg.model_copy(update={"tool_result_limit": budget, "preview_tokens": preview})
    projector = Projector(workspace, session, config=cfg)  # (nothing read or written yet)
    await announce(workspace, session, door, hook_input["session_id"])
    block = ToolResultBlock(id=tool_use_id, name=tool_name, output=text)
    cut = await projector.offload_tool_result(block)
    if not isinstance(cut.output, str) or cut.output == text:
        return {}  # within the limit once counted
    changes: dict[_Path, str | None] = dict.fromkeys(path for path, _ in stored[1:])
    changes[stored[0][0]] = cut.output
    # A field the file holds after the first text says where it starts there (a Bash
    # stderr after its stdout), never nothing: an empty stderr tells Claude none was written.
    line, starts = 1, {}
    for at in range(1, len(stored)):
        line += stored[at - 1][1].count("\n") + 1
        starts[stored[at][0]] = f"[stored whole in the file named above, from its line {line:,}]"
    replaced = _rebuilt(response, changes, starts)
    return _updated(tool_name, replaced)


def _updated(tool_name: str, replaced: Any) -> dict[str, Any]:
    """The PostToolUse output replacing the tool's output with `replaced`."""
    output: dict[str, Any] = {"hookEventName": "PostToolUse", "updatedToolOutput": replaced}
    if tool_name.startswith("mcp__"):
        output["updatedMCPToolOutput"] = replaced
    return {"hookSpecificOutput": output}


async def _store_structured(
    workspace: Workspace,
    hook_input: Mapping[str, Any],
    response: Any,
    session: str,
    cfg: ContextConfig,
    *,
    door: str,
    tool_name: str,
) -> dict[str, Any]:
    """The output of a tool whose structure is itself over a share of the limit (a dict of
    thousands of fields, a list of thousands of numbers): cutting its texts would leave the
    structure, and store the texts without the names that say what they are. It is stored
    whole as its JSON, one field a line, and replaced by the head of that file and the notice
    naming it: as text, or, for a list (an MCP content list), a text block followed by its
    images and audio, which are no text to store."""
    from ..compression import Projector
    from ..messages import ToolResultBlock

    binary: list[Any] = []
    stored: Any = response
    if isinstance(response, list):
        binary = [item for item in response if _is_binary(item)]
        stored = [item for item in response if not _is_binary(item)]
    text = json.dumps(stored, ensure_ascii=False, indent=1, default=str)
    projector = Projector(workspace, session, config=cfg)
    await announce(workspace, session, door, hook_input["session_id"])
    tool_use_id = _field(hook_input, "tool_use_id", "PostToolUse")
    block = ToolResultBlock(id=tool_use_id, name=tool_name, output=text)
    cut = await projector.offload_tool_result(block)
    if not isinstance(cut.output, str) or cut.output == text:
        return {}
    if isinstance(response, list):
        return _updated(tool_name, [{"type": "text", "text": cut.output}, *binary])
    return _updated(tool_name, cut.output)


def _is_binary(item: Any) -> bool:
    """Whether a block of a tool output is an image or audio (a payload, not text)."""
    return isinstance(item, dict) and item.get("type") in _BINARY_TYPES


def _shape(value: Any) -> str:
    """What of a tool output is sent beside its texts, as JSON: its field names, numbers,
    booleans and brackets, each text left empty and each binary payload out (`_text_leaves`
    walks the same way); "" for an output that is a text. A part deeper than `_MAX_WALK`
    levels, whose texts `_text_leaves` leaves out, is here whole."""
    if isinstance(value, str):
        return ""

    def walk(item: Any, depth: int) -> Any:
        if isinstance(item, str):
            return ""
        if depth >= _MAX_WALK:
            return item
        if isinstance(item, dict):
            if item.get("type") in _BINARY_TYPES:
                return {"type": item.get("type")}
            return {
                key: walk(child, depth + 1)
                for key, child in item.items()
                if not (isinstance(key, str) and key in _PAYLOAD_KEYS)
            }
        if isinstance(item, list):
            return [walk(child, depth + 1) for child in item]
        return item

    try:
        return json.dumps(walk(value, 0), ensure_ascii=False, separators=(",", ":"), default=str)
    except (RecursionError, ValueError):  # nested past what JSON writes: measured by its repr
        try:
            return repr(value)
        except RecursionError:
            return "\0" * (4 << 20)  # measured as over any limit a hook is given


def _within(leaves: Sequence[tuple[object, str]], limit: int) -> bool:
    """Whether texts are together at most `limit` bytes in UTF-8, so within `limit` tokens
    of the hook's o200k count (`within_bytes`), counted without joining them."""
    size = 0
    for _, text in leaves:
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            return False
    return True


def _kept_whole(
    leaves: Sequence[tuple[_Path, str]], share: int, counter: TokenCounter
) -> tuple[set[_Path], int]:
    """The paths of the shortest texts that fit `share` tokens together (a Bash output's empty
    stderr, an MCP output's short captions), which stay as they are, and their tokens."""
    from .._tokens.counters import fits_by_size  # (loaded by `post_tool_use` already)

    kept: set[_Path] = set()
    used = 0
    for path, text in sorted(leaves, key=lambda leaf: len(leaf[1])):
        if not fits_by_size(counter, text, share - used):
            tokens = counter.count_text(text) if len(text) <= share * 8 else share + 1
            if used + tokens > share:
                break
        else:
            tokens = counter.count_text(text)
        kept.add(path)
        used += tokens
    return kept, used


def needs_offload(hook_input: Any, tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT) -> bool:
    """Whether a PostToolUse input may hold an output to store: its texts together are longer
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
    if _persisted_by_claude_code(hook_input.get("tool_name"), response):
        return True
    leaves: list[tuple[object, str]] = [*_text_leaves(response), ((), _shape(response))]
    return not _within(leaves, tool_result_limit)


def _persisted_by_claude_code(tool_name: object, response: Any) -> bool:
    """Whether `response` is a Bash output Claude Code persisted itself, sending the hook its
    start and the file's path (`persistedOutputPath`). Only Claude Code's own Bash tool: the
    output of any other tool (an MCP server's, a custom one's) is that tool's data, and a
    field of that name in it is no path ctxoffload may read (a server could name any file
    the user can read, to have it sent to the model)."""
    return (
        tool_name == "Bash"
        and isinstance(response, dict)
        and isinstance(response.get("persistedOutputPath"), str)
        and isinstance(response.get("stdout"), str)
    )


def _whole_output(tool_name: str, response: Any) -> Any:
    """The tool's output, whole: where Claude Code persisted a long Bash output itself and
    sent the hook its start (`_persisted_by_claude_code`), the output read back from that
    file, and without the fields that would have Claude Code show its own copy instead."""
    if not _persisted_by_claude_code(tool_name, response):
        return response
    persisted = response["persistedOutputPath"]
    try:
        whole = _read_plain_file(persisted, MAX_PERSISTED_OUTPUT_BYTES, "persistedOutputPath")
    except InvalidContent:
        return response  # its start is all there is to store: Claude Code keeps the rest
    out = {
        k: v for k, v in response.items() if k not in ("persistedOutputPath", "persistedOutputSize")
    }
    out["stdout"] = whole.decode("utf-8", "surrogateescape")
    return out


def _text_leaves(value: Any) -> list[tuple[_Path, str]]:
    """The texts of a tool output with where each is, in the output's order: the output
    itself when it is a string, else every string inside it (iteratively, at most `_MAX_WALK`
    levels deep) except binary payloads (an image's base64) and a block's `type`, which names
    its kind."""
    found: list[tuple[_Path, str]] = []
    stack: list[tuple[_Path, Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            found.append((path, item))
        elif len(path) >= _MAX_WALK:
            continue
        elif isinstance(item, dict):
            if item.get("type") in _BINARY_TYPES:
                continue
            children = [
                ((*path, key), child)
                for key, child in item.items()
                if isinstance(key, str) and key not in _PAYLOAD_KEYS and key != "type"
            ]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(((*path, i), item[i]) for i in reversed(range(len(item))))
    return found


def _rebuilt(
    value: Any, changes: Mapping[_Path, str | None], fields: Mapping[_Path, str] | None = None
) -> Any:
    """A copy of `value` with the string at each path of `changes` replaced by its text (the
    rest shared). A text replaced by None was stored with the one shown: a list drops it (or
    the text block holding it), since a model's API refuses an empty text block; a field
    becomes its text in `fields` ("" when it has none)."""
    fields = fields or {}
    above = {path[:depth] for path in changes for depth in range(len(path))}

    def dropped(item: Any, path: _Path) -> bool:
        if isinstance(item, dict) and item.get("type") == "text":
            path = (*path, "text")
        return path in changes and changes[path] is None

    def walk(item: Any, path: _Path) -> Any:
        if path in changes:
            return changes[path] or fields.get(path, "")
        if path not in above:
            return item
        if isinstance(item, dict):
            return {key: walk(child, (*path, key)) for key, child in item.items()}
        return [
            walk(child, (*path, i))
            for i, child in enumerate(item)
            if not dropped(child, (*path, i))
        ]

    return walk(value, ())


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
