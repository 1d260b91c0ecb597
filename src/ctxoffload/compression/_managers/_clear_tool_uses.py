"""`ClearToolUses`: old tool outputs replaced by a one-line placeholder naming where each is.

Anthropic's `clear_tool_uses` context edit on ctxoffload's rules: each output is stored
before it leaves (persist before drop), the placeholder names the tool, the size and the
file, and no message leaves the context, so a tool call always keeps its result.

What is cleared is known from ctxoffload's own record, never from the text: the message's
metadata (`OUTPUTS_CLEARED`) and the placeholders this manager wrote. An output that merely
starts like a placeholder is an output. What a placeholder repeats of the output and the
call (names, ids, arguments, artifacts) goes through `defuse`: it cannot end the placeholder
early.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..._depth import json_text
from ..._disk import events
from ..._lease_lost import logged_unless_lease_lost
from ...messages import DataBlock, Msg, ToolCallBlock, ToolResultBlock, URLSource
from ...text import CLEARED_MARK, defuse
from ...workspace import Offloader
from .._index import message_artifacts, named_values
from .._summary_message import Artifact
from .._tool_names import ReaderTools, how_to_read
from .._truncate import count_output, utf8
from ._activation import Activation, SettingError, check_int
from ._tool_output import store_blocks

if TYPE_CHECKING:
    from ._run import PipelineRun

__all__ = ["CLEARED_MARK", "OUTPUTS_CLEARED", "ClearToolUses"]

logger = logging.getLogger("ctxoffload")

OUTPUTS_CLEARED = "ctxoffload_outputs_cleared"
"""The metadata key on a message some of whose tool outputs `ClearToolUses` replaced: the
indexes of those blocks in its content."""

# Arguments smaller than this stay: their placeholder would be about as long.
_INPUT_BYTES_WORTH_CLEARING = 512


def _amount(key: str, value: Any, kinds: tuple[str, ...]) -> tuple[str, int]:
    """(`kind`, value) from an int (the first kind) or Anthropic's `{"type", "value"}`."""
    if isinstance(value, Mapping):
        kind, number = value.get("type"), value.get("value")
        extra = set(value) - {"type", "value"}
        if kind not in kinds or extra:
            raise SettingError(
                key,
                f"{dict(value)!r} is not an amount in {' or '.join(kinds)}: give "
                f'{{"type": "{kinds[0]}", "value": N}} or N',
            )
        return str(kind), check_int(key, number, minimum=0)
    return kinds[0], check_int(key, value, minimum=0)


@dataclass(frozen=True)
class _Use:
    """One tool use of the context: where its result is, and its call and where that is.

    Positions, not call ids, say which block is which: a model may give the same id to
    calls of different turns (some servers send `call_0` every turn), and clearing one of
    them must leave the others as they are."""

    message: int
    block: int
    result: ToolResultBlock
    call: ToolCallBlock | None
    call_at: tuple[int, int] | None = None

    @property
    def at(self) -> tuple[int, int]:
        """(message, block): where the result is in the context."""
        return self.message, self.block


class ClearToolUses:
    """Replace the outputs of all tool uses but the newest `keep` with a one-line placeholder.

    The placeholder names the tool, the call, the output's size and the file that holds it
    whole, with how to read it back; the output is stored there first (persist before
    drop), and if storing any of them fails, nothing is cleared. No message leaves the
    context, so a call keeps its result. The outputs of the reader tools (`Read`, `Grep`,
    `Glob`, `retrieve_offloaded_content`) are not stored again: their placeholder repeats
    the call so the model can run it again. Nor is an output a post_tool manager already
    stored whole (`ToolOutputOffload`'s preview, `ToolOutputTruncate`'s or the compressor's
    head and notice), known from ctxoffload's record of it (`Compressor.whole_output`),
    never from its text: its placeholder names the files that hold the whole output, and
    the whole output's size. Pinned messages, the turn the model has not seen
    and the excluded tools are never cleared. Anthropic's key names and amounts
    (`{"type": "input_tokens", "value": N}`) are accepted as they are.

    Args:
        trigger: when to clear: an int or `{"type": "input_tokens", "value": N}` (the
            context costs more than N tokens), or `{"type": "tool_uses", "value": N}` (it
            holds more than N tool uses); None clears whenever `activation` holds.
        keep: the newest tool uses whose outputs stay (`{"type": "tool_uses", ...}` or an
            int); 3 by default.
        clear_at_least: clear only if at least this many tokens would be freed, so that the
            prompt prefix a provider caches breaks rarely; 0 by default.
        exclude_tools: tools whose outputs are never cleared.
        clear_tool_inputs: also store and replace the large arguments (over 512 bytes of
            JSON) of the calls cleared: True for every tool, or a list of tool names.
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})
    METADATA_KEY: ClassVar[str] = OUTPUTS_CLEARED
    """The key this manager sets in the metadata of a message some of whose tool outputs it
    replaced. Its value lists the indexes of those blocks in the message's content."""

    def __init__(
        self,
        *,
        trigger: int | Mapping[str, Any] | None = None,
        keep: int | Mapping[str, Any] = 3,
        clear_at_least: int | Mapping[str, Any] = 0,
        exclude_tools: Iterable[str] = (),
        clear_tool_inputs: bool | Iterable[str] = False,
        activation: Activation | None = None,
    ) -> None:
        self.trigger = None if trigger is None else _amount("trigger", trigger, _TRIGGER_KINDS)
        self.keep = _amount("keep", keep, ("tool_uses",))[1]
        self.clear_at_least = _amount("clear_at_least", clear_at_least, ("input_tokens",))[1]
        if isinstance(exclude_tools, str) or not all(isinstance(t, str) for t in exclude_tools):
            raise SettingError("exclude_tools", f"{exclude_tools!r} is not a list of tool names")
        self.exclude_tools = tuple(exclude_tools)
        if isinstance(clear_tool_inputs, bool):
            self.clear_tool_inputs: bool | frozenset[str] = clear_tool_inputs
        elif isinstance(clear_tool_inputs, str) or not all(
            isinstance(t, str) for t in clear_tool_inputs
        ):
            raise SettingError(
                "clear_tool_inputs",
                f"{clear_tool_inputs!r} is not true, false or a list of tool names",
            )
        else:
            self.clear_tool_inputs = frozenset(clear_tool_inputs)
        self.activation = Activation.from_value(activation)
        # The placeholders written, for hosts whose messages do not carry metadata back
        # (Strands' Converse): such an output is not cleared again.
        self._written: set[str] = set()

    def __repr__(self) -> str:
        if self.trigger is None:
            trigger: object = None
        elif self.trigger[0] == "input_tokens":
            trigger = self.trigger[1]
        else:
            trigger = {"tool_uses": self.trigger[1]}
        shown = f"trigger={trigger!r}, keep={self.keep}, clear_at_least={self.clear_at_least}"
        if self.exclude_tools:
            shown += f", exclude_tools={list(self.exclude_tools)!r}"
        if self.clear_tool_inputs:
            inputs = self.clear_tool_inputs
            shown += f", clear_tool_inputs={inputs if inputs is True else sorted(inputs)!r}"
        return f"ClearToolUses({shown})"

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """Not a post_tool manager: the result unchanged."""
        return result

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context with the older tool outputs replaced by placeholders.

        In a reactive run (an overflow, or a compaction the agent asked for) `trigger` and
        `clear_at_least` are ignored.
        """
        forced = run.reactive
        uses = _uses(messages)
        if not forced and not self._triggered(messages, uses, run):
            return messages
        candidates = self._candidates(messages, uses, run)
        if not candidates:
            return messages
        readers = run.compressor.reader_tools(run.config())
        counter = run.compressor.counter
        freed = sum(count_output(u.result, counter) for u in candidates)
        freed_estimate = freed - 40 * len(candidates)
        if not forced and freed_estimate < self.clear_at_least:
            run.report(
                f"ClearToolUses: {len(candidates)} outputs would free about {freed_estimate:,} "
                f"tokens, under clear_at_least {self.clear_at_least:,}"
            )
            return messages
        offloader = run.compressor.offloader
        if offloader is None:
            run.report("ClearToolUses: no offloader to store the outputs in; nothing cleared")
            return messages
        with logged_unless_lease_lost(
            "could not store the tool outputs to clear, clearing none"
        ) as failed:
            placeholders, inputs, references, stored = await self._store(
                candidates, offloader, run, readers
            )
        if failed:
            run.report(f"ClearToolUses: offload failed: {failed.error}")
            return messages
        tokens_before = run.compressor.count(messages, run.tools)
        placeholders, named = _naming(messages, candidates, placeholders, inputs, stored)
        after = _replaced(messages, placeholders, inputs)
        self._written.update(placeholders.values())
        tokens_after = run.compressor.count(after, run.tools)
        await run.compressor.event(
            events.ClearToolUses(
                cleared=len(candidates),
                tool_ids=[u.result.id for u in candidates],
                tool_names=[u.result.name for u in candidates],
                inputs_cleared=len(inputs),
                references=references,
                kept=self.keep,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                forced=forced,
                artifacts=named,
            )
        )
        run.report(f"ClearToolUses: cleared {len(candidates)} tool outputs")
        return after

    def _triggered(self, messages: list[Msg], uses: list[_Use], run: PipelineRun) -> bool:
        if self.trigger is None:
            return True
        kind, value = self.trigger
        if kind == "tool_uses":
            return len(uses) > value
        return run.compressor.count(messages, run.tools) > value

    def _candidates(self, messages: list[Msg], uses: list[_Use], run: PipelineRun) -> list[_Use]:
        clearable = run.clearable(messages)
        older = uses[: max(0, len(uses) - self.keep)]
        return [
            u
            for u in older
            if clearable[u.message]
            and not self._is_cleared(messages[u.message], u)
            and (u.result.name or "") not in self.exclude_tools
        ]

    def _is_cleared(self, msg: Msg, use: _Use) -> bool:
        """Whether ctxoffload replaced this output: by the message's mark, or (a host that
        drops metadata) by being a placeholder this manager wrote, never by how it starts."""
        marked = msg.metadata.get(OUTPUTS_CLEARED) if msg.metadata else None
        if isinstance(marked, list) and use.block in marked:
            return True
        return isinstance(use.result.output, str) and use.result.output in self._written

    def _clears_input(self, name: str) -> bool:
        inputs = self.clear_tool_inputs
        return inputs is True or (isinstance(inputs, frozenset) and name in inputs)

    async def _store(
        self,
        candidates: list[_Use],
        offloader: Offloader,
        run: PipelineRun,
        readers: ReaderTools | None,
    ) -> tuple[
        dict[tuple[int, int], str], dict[tuple[int, int], str], list[str], set[tuple[int, int]]
    ]:
        """Store each output (and large input) to clear; their placeholders and references,
        the placeholders by where the result is and where the call is (`_Use`), and where the
        outputs stored are (a reader's is not: its placeholder repeats the call).

        Raises:
            Exception: whatever the offloader raised; then nothing may be cleared.
        """
        session = run.compressor.session_id
        placeholders: dict[tuple[int, int], str] = {}
        inputs: dict[tuple[int, int], str] = {}
        references: list[str] = []
        stored: set[tuple[int, int]] = set()
        for use in candidates:
            result, name = use.result, use.result.name or "a tool"
            tokens = count_output(result, run.compressor.counter)
            if run.compressor.reads_back(use.result.name, run.config()):
                again = _call_text(use.call) if use.call is not None else name
                placeholders[use.at] = _placeholder(
                    f"the output of {_defused(again)} (~{tokens:,} tokens) was cleared from the "
                    "context; call it again to see it"
                )
            else:
                whole = await run.compressor.whole_output(result)
                if whole is not None:
                    # A stand-in a post_tool manager left (a head and a notice, a preview):
                    # the whole output is stored already, and the placeholder names it.
                    refs, size, tokens = list(whole.references), whole.bytes, whole.tokens
                else:
                    refs, size = await _store_output(result, offloader, session)
                    if not refs:
                        continue  # nothing in it to store (an empty list of blocks)
                    for ref in refs:
                        run.compressor.note_artifact(Artifact(ref, size, name))
                references += refs
                stored.add(use.at)
                where = ", ".join(refs)
                placeholders[use.at] = _placeholder(
                    f"the output of {_defused(name)} (call {_defused(result.id)}, ~{tokens:,} "
                    f"tokens, {size:,} bytes) is stored in {where}; "
                    f"{_lower(how_to_read(refs[0], 1, readers))}"
                )
            call, call_at = use.call, use.call_at
            if call is not None and call_at is not None and self._clears_input(call.name):
                arguments = json_text(call.input, ensure_ascii=False)
                size = len(utf8(arguments))
                if size > _INPUT_BYTES_WORTH_CLEARING:
                    block = ToolResultBlock(id=f"{call.id}-input", name=call.name, output=arguments)
                    ref = str(await offloader.offload_tool_result(session, block))
                    references.append(ref)
                    inputs[call_at] = _placeholder(
                        f"the arguments of {_defused(call.name)} (call {_defused(call.id)}, "
                        f"{size:,} bytes of JSON) are stored in {ref}; "
                        f"{_lower(how_to_read(ref, 1, readers))}"
                    )
        return placeholders, inputs, references, stored


_TRIGGER_KINDS = ("input_tokens", "tool_uses")


def _defused(text: str) -> str:
    """What the output or the call wrote, as a placeholder repeats it: no `]` of it can end
    the placeholder, no `[cleared: ` of it start another."""
    return defuse(text, CLEARED_MARK, "]")


def _placeholder(sentence: str) -> str:
    """A placeholder: `[cleared: `, the sentence (its parts from others already `_defused`),
    `]`."""
    return f"{CLEARED_MARK}{sentence}]"


def _lower(sentence: str) -> str:
    return sentence[:1].lower() + sentence[1:].rstrip(".")


def _call_text(call: ToolCallBlock) -> str:
    """`Read(path='/w/notes.txt', offset=1)`: the call, as the model can make it again."""
    arguments = ", ".join(f"{k}={v!r}" for k, v in call.input.items())
    return f"{call.name}({arguments})"


def _uses(messages: Sequence[Msg]) -> list[_Use]:
    """Every tool result of the context, oldest first, with its call when the context has it
    (the latest call with its id before it)."""
    calls: dict[str, tuple[ToolCallBlock, tuple[int, int]]] = {}
    uses: list[_Use] = []
    for m, msg in enumerate(messages):
        if isinstance(msg.content, str):
            continue
        for b, block in enumerate(msg.content):
            if isinstance(block, ToolCallBlock):
                calls[block.id] = (block, (m, b))
            elif isinstance(block, ToolResultBlock):
                call, call_at = calls.get(block.id, (None, None))
                uses.append(_Use(m, b, block, call, call_at))
    return uses


async def _store_output(
    result: ToolResultBlock, offloader: Offloader, session: str
) -> tuple[list[str], int]:
    """Store one output whole: its references and its size in bytes."""
    if isinstance(result.output, str):
        ref = await offloader.offload_tool_result(session, result)
        return [str(ref)], len(utf8(result.output))
    parts: list[Any] = list(result.output)
    _, stored = await store_blocks(result, parts, offloader, session)
    refs = [a.path for a in stored]
    refs += [
        p.source.url for p in parts if isinstance(p, DataBlock) and isinstance(p.source, URLSource)
    ]
    return refs, sum(a.bytes for a in stored)


_NAMED_PER_PLACEHOLDER = 8
"""The most artifacts one placeholder names; the stored output it points to holds the rest."""


def _naming(
    messages: list[Msg],
    candidates: list[_Use],
    placeholders: dict[tuple[int, int], str],
    inputs: dict[tuple[int, int], str],
    stored: set[tuple[int, int]],
) -> tuple[dict[tuple[int, int], str], dict[str, int]]:
    """The placeholders, each naming the paths, URLs, commands and ids of its output (and
    cleared input) that nothing left in the context names, at most `_NAMED_PER_PLACEHOLDER`
    (the file it points to holds the rest); and the counts for the event (`left`,
    `in_kept`, `indexed`, `cut`). A reader tool's output, not stored (not in `stored`), is
    called again: known by what `_store` did, never by the words of a call it repeats."""
    remaining = named_values(_replaced(messages, placeholders, inputs))
    counts = {"left": 0, "in_kept": 0, "indexed": 0, "cut": 0}
    seen: set[tuple[str, str]] = set()
    named = dict(placeholders)
    for use in candidates:
        text = placeholders.get(use.at)
        if text is None or use.at not in stored:
            continue
        found = message_artifacts(Msg(role="tool", content=[use.result]))
        if use.call is not None and use.call_at in inputs:
            found += message_artifacts(Msg(role="assistant", content=[use.call]))
        missing: list[str] = []
        for artifact in found:
            if artifact in seen:
                continue
            seen.add(artifact)
            counts["left"] += 1
            if artifact in remaining:
                counts["in_kept"] += 1
            else:
                missing.append(artifact[1])
        shown = missing[:_NAMED_PER_PLACEHOLDER]
        counts["indexed"] += len(shown)
        counts["cut"] += len(missing) - len(shown)
        if shown:
            more = len(missing) - len(shown)
            rest = f", and {more} more there" if more else ""
            names = " | ".join(_defused(value) for value in shown)
            named[use.at] = text[:-1] + "; it names " + names + rest + "]"
    return named, counts


def _replaced(
    messages: list[Msg],
    placeholders: dict[tuple[int, int], str],
    inputs: dict[tuple[int, int], str],
) -> list[Msg]:
    """`messages` with the outputs (and inputs) of the tool uses cleared replaced, each at its
    place (`_Use.at`, `_Use.call_at`)."""
    touched = {m for m, _ in placeholders} | {m for m, _ in inputs}
    after = list(messages)
    for m in sorted(touched):
        msg = messages[m]
        assert not isinstance(msg.content, str)
        content: list[Any] = []
        cleared: list[int] = []
        for b, block in enumerate(msg.content):
            if isinstance(block, ToolResultBlock) and (m, b) in placeholders:
                block = block.model_copy(update={"output": placeholders[m, b]})
                cleared.append(b)
            elif isinstance(block, ToolCallBlock) and (m, b) in inputs:
                block = block.model_copy(update={"input": {"cleared": inputs[m, b]}})
            content.append(block)
        update: dict[str, Any] = {"content": content}
        if cleared:
            # ctxoffload's record of what it cleared: how a later run tells a placeholder
            # from an output that starts like one.
            before = msg.metadata.get(OUTPUTS_CLEARED)
            known = [b for b in before if isinstance(b, int)] if isinstance(before, list) else []
            marked = sorted(set(known) | set(cleared))
            update["metadata"] = {**msg.metadata, OUTPUTS_CLEARED: marked}
        after[m] = msg.model_copy(update=update)
    return after
