"""Managers for tool results (post_tool): `ToolOutputOffload` and `ToolOutputTruncate`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..._depth import json_text, load_json
from ..._disk import events
from ..._disk.payloads import count_lines
from ..._lease_lost import logged_unless_lease_lost
from ...messages import Base64Source, DataBlock, Msg, TextBlock, ToolResultBlock, URLSource
from ...text import defuse
from ...workspace import Offloader
from .._stored_outputs import WholeOutput, kept_digest
from .._summary_message import Artifact
from .._tool_names import how_to_read
from .._truncate import count_output, head_within, tail_within, truncate_tool_result, utf8
from ._activation import Activation, SettingError, check_int

if TYPE_CHECKING:
    from ...tokens import TokenCounter
    from .._config import ContextConfig
    from ._run import PipelineRun

__all__ = [
    "PREVIEWS",
    "ToolOutputOffload",
    "ToolOutputTruncate",
    "block_kind",
    "payload_size",
    "store_blocks",
]

logger = logging.getLogger("ctxoffload")

Preview = Literal["head", "head_tail"]
PREVIEWS: tuple[Preview, ...] = ("head", "head_tail")
"""The preview styles of an offloaded or truncated result (see `truncate_text`)."""


def _checked_preview(preview: Preview) -> Preview:
    """`preview` if it is one of `PREVIEWS` (a user's value may be any)."""
    if preview not in PREVIEWS:
        raise SettingError("preview", f"{preview!r} is not 'head' or 'head_tail'")
    return preview


ShouldOffload = Callable[[str, ToolResultBlock], "bool | None"]


def block_kind(media_type: str | None) -> str:
    """`image/png` -> `image: png`; `application/pdf` -> `document: pdf`."""
    if not media_type:
        return "data"
    main, _, sub = media_type.partition("/")
    sub = sub.split(";")[0].split("+")[0] or "data"
    if main == "image":
        return f"image: {sub}"
    if main in ("audio", "video"):
        return f"{main}: {sub}"
    return f"document: {sub}"


def payload_size(block: DataBlock) -> int | None:
    """The decoded size in bytes of an inline (base64) payload, from its length alone; None
    for a payload given by URL."""
    if isinstance(block.source, Base64Source):
        data = block.source.data
        return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
    return None


def _is_json(text: str) -> bool:
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        return False
    try:
        load_json(text)
    except ValueError:  # not JSON, or deeper than any the workspace reads back: text
        return False
    return True


class ToolOutputOffload:
    """Offload a big tool result block by block, leaving a header, guidance and a preview.

    Each text block goes to its own `tool_result-<id>.txt` (the whole block), each image,
    audio or document block to data/ with its media type. The context gets
    `[Offloaded: N blocks, ~T tokens]`, a sentence naming the agent's reader tools, the first
    `preview_tokens` of the text (or its head and tail), and one line per stored block:
    `[text, 12,345 bytes, 300 lines | ref: …]`, `[image: png, 1,032 bytes | ref: …]`.
    Persist before drop: if any block cannot be stored, the result stays whole.

    Args:
        max_tokens: a result over this many tokens is offloaded.
        preview_tokens: tokens of text kept as the preview; at most `max_tokens`.
        preview: "head", or "head_tail" (two thirds from the start, one third from the end).
        exclude_tools: tools whose results are never offloaded. The reader tools (`Read`,
            `Grep`, `Glob`, `retrieve_offloaded_content`) never are.
        should_offload: `(tool_name, result) -> bool | None`, asked first: True offloads
            whatever the size, False keeps the result, None falls back to `max_tokens`.
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"post_tool"})

    def __init__(
        self,
        *,
        max_tokens: int = 2500,
        preview_tokens: int = 1000,
        preview: Literal["head", "head_tail"] = "head",
        exclude_tools: Iterable[str] = (),
        should_offload: ShouldOffload | None = None,
        activation: Activation | None = None,
    ) -> None:
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=1)
        self.preview_tokens = check_int("preview_tokens", preview_tokens, minimum=0)
        if self.preview_tokens > self.max_tokens:
            raise SettingError(
                "preview_tokens",
                f"preview_tokens {preview_tokens} is above max_tokens {max_tokens}: a preview "
                "larger than the limit would never shrink the result",
                others=("max_tokens",),
            )
        self.preview = _checked_preview(preview)
        if (
            isinstance(exclude_tools, str | Mapping)
            or not isinstance(exclude_tools, Iterable)
            or not all(isinstance(t, str) for t in exclude_tools)
        ):
            raise SettingError(
                "exclude_tools",
                f"a {type(exclude_tools).__name__} that is not all strings is not a list of "
                "tool names: give a list such as ['ls', 'cat']",
            )
        self.exclude_tools = frozenset(exclude_tools)
        if should_offload is not None and not callable(should_offload):
            raise SettingError("should_offload", f"{should_offload!r} is not callable")
        self.should_offload = should_offload
        self.activation = Activation.from_value(activation)

    def __repr__(self) -> str:
        return (
            f"ToolOutputOffload(max_tokens={self.max_tokens}, "
            f"preview_tokens={self.preview_tokens}, preview={self.preview!r})"
        )

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """Not a pre_llm manager: the context unchanged."""
        return messages

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The result, or its header, preview and references when it is offloaded."""
        offloader = run.compressor.offloader
        tokens = None if offloader is None else self._tokens_to_offload(result, run)
        if offloader is None or tokens is None:
            return result
        parts: list[Any] = (
            [TextBlock(text=result.output)] if isinstance(result.output, str) else result.output
        )
        with logged_unless_lease_lost(
            "could not offload the result of %s (call %s) block by block, keeping it whole",
            result.name or "a tool",
            result.id,
        ) as failed:
            lines, stored = await store_blocks(result, parts, offloader, run.compressor.session_id)
        if failed:
            return result
        output = self._offloaded_text(parts, tokens, lines, stored, run)
        for artifact in stored:
            run.compressor.note_artifact(artifact)
        references = [a.path for a in stored]
        size = sum(a.bytes for a in stored)
        stand_in: dict[str, Any] = {}
        if references:  # else only blocks given by URL, which nothing stored
            whole = WholeOutput(tuple(references), size, tokens)
            run.compressor.note_stored_output(result.id, output, whole)
            stand_in = {"bytes": size, "kept_sha256": kept_digest(output)}
        await run.compressor.event(
            events.Offload(
                tool_id=result.id,
                tool_name=result.name,
                blocks=len(parts),
                references=references,
                **stand_in,
                tokens_before=tokens,
                tokens_after=run.compressor.counter.count_text(output),
            )
        )
        return result.model_copy(update={"output": output})

    def _tokens_to_offload(self, result: ToolResultBlock, run: PipelineRun) -> int | None:
        """The result's tokens when it is to be offloaded; None when it stays whole (a reader
        tool's, an excluded tool's, refused by `should_offload`, or within `max_tokens`)."""
        name = result.name or ""
        # A reader's result is never offloaded: offloading what was read back would loop.
        if run.compressor.reads_back(name, run.config()) or name in self.exclude_tools:
            return None
        verdict = None if self.should_offload is None else self.should_offload(name, result)
        if verdict is not None and not verdict:
            return None
        # Counted once: the decision and the header use it.
        tokens = count_output(result, run.compressor.counter)
        if verdict is None and tokens <= self.max_tokens:
            return None
        return tokens

    def _offloaded_text(
        self,
        parts: Sequence[Any],
        tokens: int,
        lines: list[str],
        stored: list[Artifact],
        run: PipelineRun,
    ) -> str:
        """What the context keeps of an offloaded result: a header, how to read it back, a
        preview of its text, and one line per stored block."""
        text = "\n\n".join(p.text for p in parts if isinstance(p, TextBlock))
        # The preview is the tool's text: it may not end the preview early.
        preview = defuse(self._preview(text, run))
        readers = run.compressor.reader_tools(run.config())
        first_ref = next((a.path for a in stored if a.lines is not None), None)
        guidance = (
            "The whole result was stored in the workspace; the context keeps a preview. "
            + (how_to_read(first_ref, None, readers) if first_ref else "")
        ).strip()
        plural = "block" if len(parts) == 1 else "blocks"
        return "\n".join(
            [
                f"[Offloaded: {len(parts)} {plural}, ~{tokens:,} tokens]",
                guidance,
                *([f"--- preview ---\n{preview}\n--- end of preview ---"] if preview else []),
                "Stored blocks:",
                *lines,
            ]
        )

    def _preview(self, text: str, run: PipelineRun) -> str:
        counter = run.compressor.counter
        if not text or self.preview_tokens == 0:
            return ""
        if counter.count_text(text) <= self.preview_tokens:
            return text
        if self.preview == "head":
            head, _, partial = head_within(text, self.preview_tokens, counter)
            return head + (" […]" if partial else "\n[…]")
        head, shown, _ = head_within(text, self.preview_tokens * 2 // 3, counter)
        tail = tail_within(text.split("\n")[shown:], self.preview_tokens // 3, counter)
        return f"{head}\n[…]\n" + "\n".join(tail)


async def store_blocks(
    result: ToolResultBlock, parts: Sequence[Any], offloader: Offloader, session_id: str
) -> tuple[list[str], list[Artifact]]:
    """Store each block of a result: a text block in its own tool_result file (the whole
    block), a data block in data/.

    Returns:
        One line per block naming where it went, and the files stored (for the trail).

    Raises:
        Exception: whatever the offloader raised; then the result must stay whole.
    """
    texts = sum(isinstance(p, TextBlock) for p in parts)
    source = result.name or "a tool"
    lines: list[str] = []
    stored: list[Artifact] = []
    for index, part in enumerate(parts):
        if isinstance(part, TextBlock):
            suffix = "" if texts == 1 else f".{index + 1}"
            block = ToolResultBlock(id=f"{result.id}{suffix}", name=result.name, output=part.text)
            ref = await offloader.offload_tool_result(session_id, block)
            size = len(utf8(part.text))
            count = count_lines(part.text)
            kind = "json" if _is_json(part.text) else "text"
            lines.append(f"[{kind}, {size:,} bytes, {count:,} lines | ref: {ref}]")
            stored.append(Artifact(str(ref), size, source, count))
        else:  # a DataBlock: the output holds only text and data blocks
            payload = payload_size(part)
            kept = part if isinstance(part.source, URLSource) else None
            if kept is None:
                kept = await offloader.offload_data_block(part)
            if not isinstance(kept.source, URLSource):
                raise TypeError(f"the offloader returned {kept!r:.200}, not a reference")
            ref = kept.source.url
            shown = f", {payload:,} bytes" if payload is not None else ""
            lines.append(f"[{block_kind(part.media_type)}{shown} | ref: {ref}]")
            if payload is not None:
                stored.append(Artifact(ref, payload, source))
    return lines, stored


_DATA_LINE_CHARS = 120


class _CharCounter:
    """Counts characters instead of tokens, for `ToolOutputTruncate(max_output_length=)`."""

    name: str = "characters"
    is_exact: bool = True

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, msg: Msg) -> int:
        total = 0
        for block in msg.blocks:
            if isinstance(block, TextBlock):
                total += len(block.text)
            elif isinstance(block, ToolResultBlock):
                if isinstance(block.output, str):
                    total += len(block.output)
                else:
                    # A stored payload appears as one `<data url=... />` line of about this size.
                    total += sum(
                        len(p.text) if isinstance(p, TextBlock) else _DATA_LINE_CHARS
                        for p in block.output
                    )
        return total

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        return sum(self.count_message(m) for m in msgs)

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        return len(json_text(list(tools)))


class ToolOutputTruncate:
    """Truncate a tool result to `max_output_length` characters or `max_tokens` tokens.

    OpenSearch's `ToolsOutputTruncateManager`, but nothing is lost: with an offloader the
    whole output is stored first and the kept head ends with a notice naming the file.

    Args:
        max_output_length: the most characters kept (OpenSearch's key).
        max_tokens: the most tokens kept; give this or `max_output_length`, not both.
        preview: "head", or "head_tail".
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"post_tool"})

    def __init__(
        self,
        *,
        max_output_length: int | None = None,
        max_tokens: int | None = None,
        preview: Literal["head", "head_tail"] = "head",
        activation: Activation | None = None,
    ) -> None:
        if (max_output_length is None) == (max_tokens is None):
            raise SettingError(
                "max_output_length" if max_output_length is not None else "max_tokens",
                "give exactly one of max_output_length (characters) and max_tokens",
            )
        self.max_output_length = (
            check_int("max_output_length", max_output_length, minimum=1)
            if max_output_length is not None
            else None
        )
        self.max_tokens = (
            check_int("max_tokens", max_tokens, minimum=1) if max_tokens is not None else None
        )
        self.preview = _checked_preview(preview)
        self.activation = Activation.from_value(activation)
        # The config it stands for (`from_config`): then it truncates as the `Compressor`
        # does, under the run's settings (`PipelineRun.config`), never a copy here.
        self._config: ContextConfig | None = None

    @classmethod
    def from_config(cls, config: ContextConfig) -> ToolOutputTruncate:
        """The manager a `ContextConfig` stands for: `tool_result_limit`, `preview_tokens`,
        `preview`, kept within the reserve as the `Compressor` does."""
        manager = cls(max_tokens=config.tool_result_limit, preview=config.preview)
        manager._config = config
        return manager

    def __repr__(self) -> str:
        if self.max_output_length is not None:
            return f"ToolOutputTruncate(max_output_length={self.max_output_length})"
        return f"ToolOutputTruncate(max_tokens={self.max_tokens})"

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """Not a pre_llm manager: the context unchanged."""
        return messages

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The result, or its head and a notice naming the file that holds all of it."""
        compressor = run.compressor
        if compressor.reads_back(result.name, run.config()):
            return result
        if self._config is not None:
            return await compressor.process_tool_result(result, config=run.config())
        chars = self.max_output_length is not None
        limit = self.max_output_length if chars else self.max_tokens
        assert limit is not None
        counter: TokenCounter = _CharCounter() if chars else compressor.counter
        done = await truncate_tool_result(
            result,
            limit=limit,
            counter=counter,
            offloader=compressor.offloader,
            session_id=compressor.session_id,
            preview=self.preview,
            readers=compressor.reader_tools(run.config()),
        )
        if done is None:
            return result
        return await compressor.truncated(result, done, unit="characters" if chars else "tokens")
