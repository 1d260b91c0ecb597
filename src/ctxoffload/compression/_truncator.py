"""Truncation, a compressor's per-result job: a tool result over `tool_result_limit` goes to
the offloader whole and the context keeps its head and a notice naming the file; the fresh
turn that alone exceeds the reserve is cut down (its results again from their files); a
message's long text is offloaded the same way.

The cutting itself (`truncate_tool_result`, `truncate_text`) is in `_truncate.py`; this job
remembers what it cut, so a result is cut again from its file and a text it cut is never
stored a second time, and records each cut (the artifact trail, a `truncation` event).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from .._disk import events
from .._disk.records import Event
from .._lease_lost import logged_unless_lease_lost
from ..formats import read_tool_result
from ..messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ..workspace import ReferenceReader
from ._config import RESULT_FLOOR
from ._protect import is_pinned
from ._services import RunServices, RunSettings
from ._stored_outputs import WholeOutput, kept_digest
from ._summary_message import Artifact
from ._truncate import Truncation, rendered_text, truncate_text, truncate_tool_result

__all__ = ["FRESH_PREVIEW_FLOOR", "TEXT_CUT", "Truncator"]

logger = logging.getLogger("ctxoffload")

FRESH_PREVIEW_FLOOR = RESULT_FLOOR
"""The fewest tokens a fresh tool result (or a fresh message's text) is cut down to when the
messages the model has not seen yet exceed the reserve on their own: room for the notice
that names the file and a few lines. Fresh content is never cut below this, so a turn with
many results may stay above the reserve (it still leaves the context only after the model
has seen it)."""

TEXT_CUT = "ctxoffload_text_cut"
"""The metadata key of a message whose text ctxoffload cut: the sha256 of the cut text. What
says a text was cut is this record, never a notice in the text, which a user or a tool can
write; the digest makes the mark stale once the text changes."""

_CUT_TEXTS_KEPT = 256
"""How many digests of cut texts a compressor remembers, for hosts whose messages lose their
metadata between calls."""


class Truncator:
    """A compressor's truncation job, on the run's shared services.

    Args:
        services: the counter, offloader, session, settings and summary state it shares
            with compaction.
    """

    def __init__(self, services: RunServices) -> None:
        self.services = services
        # Tool results truncated since the previous call, by call id: what a fresh result
        # is cut from again when its turn must shrink.
        self._recent: dict[str, Truncation] = {}
        self._said: set[tuple[Any, ...]] = set()
        # Digests of the message texts this compressor cut (see `truncate_message`).
        self._cut_texts: deque[str] = deque(maxlen=_CUT_TEXTS_KEPT)
        # The file each call argument this compressor cut went to, by the digest of the cut
        # (see `_cut_argument`): a cut cut again comes from that file, not from itself.
        self._argument_cuts: OrderedDict[str, str] = OrderedDict()

    async def _event(self, record: Event) -> None:
        await self.services.event(record)

    def keep_recent(self, live_calls: Collection[str]) -> None:
        """Forget the truncations of results no longer fresh (not among `live_calls`)."""
        self._recent = {k: v for k, v in self._recent.items() if k in live_calls}

    def release(self) -> None:
        """Let go of the whole text of each result cut since the previous call, for a
        compressor kept between runs (a door's projector, one per conversation of a server):
        each is stored whole already, and a result cut again is cut from its file, read back
        then, as a run resumed in another process cuts it (the same stand-in, the same
        notice). What says which result was cut, and where it went, stays. A text the
        offloader cannot read back is kept."""
        if not isinstance(self.services.offloader, ReferenceReader):
            return
        # A new dict of new records: a call of another thread may be reading the old ones.
        self._recent = {key: _released(done) for key, done in self._recent.items()}

    async def process_tool_result(
        self, block: ToolResultBlock | Mapping[str, Any] | Msg, settings: RunSettings
    ) -> ToolResultBlock:
        """Offload and truncate one tool result if it is over `tool_result_limit` (see
        `Compressor.process_tool_result`)."""
        block = read_tool_result(block, caller="Compressor.process_tool_result")
        cfg = settings.config
        window = settings.known_window()
        services = self.services
        # A result this compressor cut already, given again (a host that passes on only what
        # fits a limit of its own asks for less), is cut from the file it went to: stored and
        # recorded once.
        preview_tokens = self.preview_tokens(settings, window)
        again = await self._cut_from_file(
            block, min(cfg.tool_result_limit, preview_tokens), settings
        )
        if again is not None:
            return again
        done = await truncate_tool_result(
            block,
            limit=cfg.tool_result_limit,
            counter=services.counter,
            offloader=services.offloader,
            session_id=services.session_id,
            preview_tokens=preview_tokens,
            preview=cfg.preview,
            readers=settings.readers,
        )
        if done is None:
            return block
        return await self.truncated(block, done)

    async def process_message(self, msg: Msg, settings: RunSettings) -> Msg:
        """`process_tool_result` for every tool result in a message."""
        if not msg.tool_results:
            return msg
        return await _with_results(msg, lambda b: self.process_tool_result(b, settings))

    async def truncated(
        self, block: ToolResultBlock, done: Truncation, **extra: Any
    ) -> ToolResultBlock:
        """Remember a truncation (artifact trail, re-cuts) and record its event."""
        self._recent[block.id] = done
        stored: dict[str, Any] = {}
        if done.reference is not None:
            trail = self.services.state.artifacts
            # (A restarted process cuts again a result the record already put in the trail.)
            if not any(a.path == done.reference for a in reversed(trail)):
                trail.append(
                    Artifact(
                        done.reference, done.total_bytes, block.name or "a tool", done.total_lines
                    )
                )
            stored = self._note_stand_in(block.id, done, str(done.block.output))
        await self._event(
            events.Truncation(
                tool_id=block.id,
                tool_name=block.name,
                reference=done.reference,
                tokens_before=done.tokens_before,
                tokens_after=done.tokens_after,
                **_estimated(done.tokens_before_bounds),
                lines_shown=done.shown_lines,
                lines_total=done.total_lines,
                # Only when true: the lines of every other truncation stay as they were.
                **({"last_line_partial": True} if done.last_line_partial else {}),
                **stored,
                **extra,
            )
        )
        return done.block

    def _note_stand_in(self, tool_id: str, done: Truncation, kept: str) -> dict[str, Any]:
        """Note that the context keeps `kept` for the result `done` stored whole (see
        `StoredOutputs`); the fields that record it in the truncation's event."""
        assert done.reference is not None
        whole = WholeOutput((done.reference,), done.total_bytes, done.tokens_before)
        self.services.stored_outputs.note(tool_id, kept, whole)
        return {"bytes_total": done.total_bytes, "kept_sha256": kept_digest(kept)}

    def preview_tokens(self, settings: RunSettings, window: int | None) -> int:
        """The preview size in effect: the config's, kept within the reserve.

        A preview larger than the reserve could never stay beside its call when the context
        is compressed; it is cut to the reserve (at least `FRESH_PREVIEW_FLOOR`). A default
        is derived to fit (`ContextConfig.preview_budget`); a value the user chose that does
        not fit is said once.
        """
        cfg = settings.config
        preview = cfg.preview_budget(window)
        if window is None:
            return preview
        reserve = cfg.reserve_tokens(window)
        cap = cfg.result_room(window)
        if not cfg.misfit(window):
            return min(preview, cap)
        preview = cfg.preview_budget()
        key = (cfg.tool_result_limit, preview, window, reserve)
        if key not in self._said:
            self._said.add(key)
            logger.warning(
                "tool_result_limit %d with a %d-token preview does not fit the reserve of %d "
                "tokens (reserve_ratio %s of a %d-token window): previews of offloaded results "
                "are cut to %d tokens, and fresh results that exceed the reserve down to %d; "
                "lower tool_result_limit or preview_tokens, or raise reserve_ratio",
                cfg.tool_result_limit,
                preview,
                reserve,
                cfg.reserve_ratio,
                window,
                cap,
                FRESH_PREVIEW_FLOOR,
            )
        return cap

    async def truncate_message(self, msg: Msg, limit: int) -> Msg:
        """Offload a message's text that alone exceeds `limit` tokens; keep its head.

        Used for a user request over the reserve and for the text of a fresh message that
        must shrink; tool calls and other blocks stay as they are.
        """
        services = self.services
        text = msg.text
        # Text tokens, not message tokens: the cut text fits `limit` but the message adds its
        # overhead, and comparing that with `limit` would cut the cut text again next time.
        if services.counter.count_text(text) <= limit or not text:
            return msg
        if _cut_by_us(msg, self._cut_texts):
            # Its text is a cut this compressor (or the one before a resume) wrote: cutting
            # it again would store a copy of a notice, one more hop from the whole text.
            return msg
        owner = "user's" if msg.role == "user" else f"{msg.role}'s"
        source = f"{msg.role} message"
        reference: str | None = None
        if services.offloader is not None:
            with logged_unless_lease_lost(
                "could not offload a long %s, keeping it whole", source
            ) as failed:
                reference = await services.offloader.offload_tool_result(
                    services.session_id,
                    ToolResultBlock(id=f"{msg.role}-{msg.id}", name=source, output=text),
                )
            if failed:
                return msg
        cut = truncate_text(
            text,
            limit=limit,
            counter=services.counter,
            reference=reference,
            what=f"the {owner} message",
            readers=services.settings.readers,
        )
        if reference is not None:
            services.state.artifacts.append(
                Artifact(reference, cut.total_bytes, source, cut.total_lines)
            )
        # Recorded as a result's cut is: the record says every file stored since the latest
        # compaction, which a resumed session lists in its next summary as an unbroken one does.
        await self._event(
            events.Truncation(
                tool_id=f"{msg.role}-{msg.id}",
                tool_name=source,
                reference=reference,
                tokens_before=services.counter.count_text(text),
                tokens_after=services.counter.count_text(cut.text),
                lines_shown=cut.shown_lines,
                lines_total=cut.total_lines,
                **({"last_line_partial": True} if cut.last_line_partial else {}),
                **({"bytes_total": cut.total_bytes} if reference is not None else {}),
            )
        )
        others = [b for b in msg.blocks if not isinstance(b, TextBlock)]
        content: list[Any] = [TextBlock(text=cut.text), *others]
        digest = _digest(cut.text)
        self._cut_texts.append(digest)
        metadata = {**msg.metadata, TEXT_CUT: digest}
        return msg.model_copy(
            update={"content": content if others else cut.text, "metadata": metadata}
        )

    async def fit_fresh(
        self,
        fresh: list[Msg],
        reserve: int,
        settings: RunSettings,
        *,
        calls_over: int | None = None,
    ) -> list[Msg]:
        """The fresh messages, their tool results and long texts cut so they fit the reserve.

        Each result (or long text) gets an equal share of the reserve, never less than
        `FRESH_PREVIEW_FLOOR` tokens; results are offloaded whole first (those truncated
        already are cut again from the file they went to). With `calls_over`, what is still
        over that many tokens then has the long strings among its answered tool calls'
        arguments cut too (`cut_calls`): the calls the model wrote are cut only when the
        turn could not be sent otherwise.
        """
        count = self.services.tracker.count_message
        if sum(count(m) for m in fresh) <= reserve:
            return fresh
        items = sum(len(m.tool_results) or 1 for m in fresh)
        limit = max(FRESH_PREVIEW_FLOOR, reserve // max(1, items))
        cut = [await self._cut_fresh(m, limit, settings) for m in fresh]
        if calls_over is not None and sum(count(m) for m in cut) > calls_over:
            # (A call's result follows it: a fresh call's result, if any, is fresh too.)
            answered = {b.id for m in cut for b in m.tool_results}
            cut = await self.cut_calls(cut, calls_over, settings, answered)
        return cut

    async def _cut_fresh(self, msg: Msg, limit: int, settings: RunSettings) -> Msg:
        if is_pinned(msg):
            return msg  # a pin is never cut; the pins' share of the window was checked
        if not msg.tool_results:
            if msg.role in ("user", "assistant", "tool") and msg.text:
                return await self.truncate_message(msg, limit)
            return msg
        return await _with_results(msg, lambda b: self._cut_fresh_result(b, limit, settings))

    async def cut_calls(
        self, messages: list[Msg], tokens: int, settings: RunSettings, answered: Collection[str]
    ) -> list[Msg]:
        """`messages` with the arguments of their answered tool calls cut so that together
        they fit `tokens` (a call that wrote a whole file, an edit's old and new text, rows
        of a table): first the long strings among them, then, if the calls are still over,
        each argument that is no string (a list or an object) as its JSON, one item a line.
        Each gets an equal share of what the rest leaves, never less than
        `FRESH_PREVIEW_FLOOR`; each cut is stored whole in a file of its own first (line
        numbers match, a literal search finds it, as in any stored result) and keeps its head
        and a notice naming that file. The calls keep their ids, names and every other
        argument. Only calls whose results are in `answered` are cut: the host ran them, and
        only what the model is sent of them changes; a call still to run, and a pinned
        message, stay as they are, as does an argument the offloader cannot store."""
        cut = await self._cut_pieces(messages, tokens, settings, answered, _long_strings)
        count = self.services.tracker.count_message
        if sum(count(m) for m in cut) > tokens:
            cut = await self._cut_pieces(cut, tokens, settings, answered, _structured)
        return cut

    async def _cut_pieces(
        self,
        messages: list[Msg],
        tokens: int,
        settings: RunSettings,
        answered: Collection[str],
        pieces: Callable[[dict[str, Any]], Iterator[tuple[tuple[str | int, ...], str]]],
    ) -> list[Msg]:
        """`cut_calls` for the pieces (place, text) that `pieces` finds in a call's
        arguments."""
        services = self.services
        count = services.counter.count_text
        found: list[tuple[int, int, tuple[str | int, ...], str, int]] = []
        for at, msg in enumerate(messages):
            if is_pinned(msg) or isinstance(msg.content, str):
                continue
            for position, block in enumerate(msg.content):
                if isinstance(block, ToolCallBlock) and block.id in answered:
                    for path, text in pieces(block.input):
                        # What the piece costs as it is sent now: in the call's JSON (a
                        # text's line breaks and quotes escaped, a list as its JSON).
                        now = _value_at(block.input, path)
                        sent = count(json.dumps(now, ensure_ascii=False, default=str))
                        found.append((at, position, path, text, sent))
        if not found:
            return messages
        total = sum(services.tracker.count_message(m) for m in messages)
        fixed = total - sum(size for *_, size in found)
        share = max(FRESH_PREVIEW_FLOOR, (tokens - fixed) // len(found))
        contents: dict[int, list[Any]] = {at: list(messages[at].content) for at, *_ in found}
        for at, position, path, text, size in found:
            if size <= share:
                continue
            call = contents[at][position]
            # Cut as text to the share it takes once written in the call's JSON, escaped.
            escaped = count(json.dumps(text, ensure_ascii=False))
            limit = max(1, share * count(text) // max(1, escaped))
            cut = await self._cut_argument(call, path, text, limit, settings)
            if cut is not None:
                contents[at][position] = call.model_copy(
                    update={"input": _replaced(call.input, path, cut)}
                )
        out = list(messages)
        for at, content in contents.items():
            if any(a is not b for a, b in zip(content, messages[at].content, strict=True)):
                out[at] = messages[at].model_copy(update={"content": content})
        return out

    async def _cut_argument(
        self,
        block: ToolCallBlock,
        path: tuple[str | int, ...],
        text: str,
        limit: int,
        settings: RunSettings,
    ) -> str | None:
        """The argument of `block` at `path`, whose text is `text` (the string, or the JSON
        of a list or object), stored whole and cut to `limit` tokens; None when it could not
        be stored (it then stays whole)."""
        services = self.services
        name = ".".join(str(step) for step in path)
        offloader = services.offloader
        if offloader is None:
            return None
        form = "" if isinstance(_value_at(block.input, path), str) else ", as JSON"
        # A cut this compressor made, cut again (a retry after an overflow asks for less),
        # comes from the file holding the whole, which its notice names still.
        earlier = await self._earlier_argument(text)
        whole, reference = earlier if earlier is not None else (text, None)
        if reference is None:
            with logged_unless_lease_lost(
                "could not offload argument %r of call %s, keeping it whole", name, block.id
            ) as failed:
                reference = await offloader.offload_tool_result(
                    services.session_id,
                    ToolResultBlock(
                        id=f"{block.id}.{name}", name=f"{block.name} argument {name}", output=text
                    ),
                )
            if failed:
                return None
        cut = truncate_text(
            whole,
            limit=limit,
            counter=services.counter,
            reference=reference,
            what=f"the argument {name!r} of call {block.id} ({block.name}){form}",
            readers=settings.readers,
            preview=settings.config.preview,
        )
        if earlier is None:
            services.state.artifacts.append(
                Artifact(reference, cut.total_bytes, f"{block.name} argument", cut.total_lines)
            )
            await self._event(
                events.Truncation(
                    tool_id=block.id,
                    tool_name=block.name,
                    reference=reference,
                    tokens_before=services.counter.count_text(text),
                    tokens_after=services.counter.count_text(cut.text),
                    lines_shown=cut.shown_lines,
                    lines_total=cut.total_lines,
                    bytes_total=cut.total_bytes,
                    argument=name,
                    reason="the newest turn exceeds the reserve",
                )
            )
        self._remember_argument(cut.text, reference)
        return cut.text

    async def _earlier_argument(self, text: str) -> tuple[str, str] | None:
        """The whole text and the file of the argument `text` is this compressor's cut of;
        None for any other text (or a file that cannot be read: it is then stored anew)."""
        reference = self._argument_cuts.get(_digest(text))
        reader = self.services.offloader
        if reference is None or not isinstance(reader, ReferenceReader):
            return None
        try:
            raw = await reader.read_reference(reference)
        except Exception as exc:
            logger.warning("could not read %s to cut an argument again: %s", reference, exc)
            return None
        whole = raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else raw
        return whole, reference

    def _remember_argument(self, cut: str, reference: str) -> None:
        cuts = self._argument_cuts
        cuts[_digest(cut)] = reference
        while len(cuts) > _CUT_TEXTS_KEPT:
            cuts.popitem(last=False)

    async def _cut_fresh_result(
        self, block: ToolResultBlock, limit: int, settings: RunSettings
    ) -> ToolResultBlock:
        services = self.services
        readers = settings.readers
        cfg = settings.config
        again = await self._cut_from_file(block, limit, settings)
        if again is not None:
            return again
        if block.id not in self._recent:
            recut = await self._recut_stand_in(block, limit, settings)
            if recut is not None:
                return recut
        done = await truncate_tool_result(
            block,
            limit=limit,
            counter=services.counter,
            offloader=services.offloader,
            session_id=services.session_id,
            preview=cfg.preview,
            readers=readers,
        )
        if done is None:
            return block
        return await self.truncated(block, done, reason="the newest turn exceeds the reserve")

    async def _cut_from_file(
        self, block: ToolResultBlock, limit: int, settings: RunSettings
    ) -> ToolResultBlock | None:
        """`block` under `limit` tokens when it is a result this compressor cut since the
        previous call (whole again, or a stand-in it left): as it is where it fits, else cut
        again from the file it went to. None for any other result, and for one whose file
        is gone or holds another text now (it is then stored again, as a result this
        compressor never saw)."""
        earlier = self._recent.get(block.id)
        if earlier is None or earlier.reference is None or not _result_of(block, earlier):
            return None
        if self.services.counter.count_text(str(block.output)) <= limit:
            return block
        full_text = await self._full_text(earlier, earlier.reference)
        if full_text is None:
            return None
        cut = self._cut_again(block, full_text, earlier.reference, limit, settings, earlier.data)
        earlier.stand_ins[:] = [*earlier.stand_ins[-7:], cut]
        # In this run's memory only: a resumed run stores such a cut again when it clears it
        # (its truncation event records the first cut).
        self._note_stand_in(block.id, earlier, cut)
        return block.model_copy(update={"output": cut})

    async def _full_text(self, done: Truncation, reference: str) -> str | None:
        """The whole text `done` cut: held, or once let go of (`release`), read back from
        `reference` and known by its digest; None when it cannot be read, or is no longer
        that text."""
        if not done.full_sha256:
            return done.full_text
        reader = self.services.offloader
        if not isinstance(reader, ReferenceReader):
            return None  # (`release` keeps the text then: not met)
        try:
            raw = await reader.read_reference(reference)
        except Exception as exc:
            logger.warning("could not read %s to cut a result again: %s", reference, exc)
            return None
        if isinstance(raw, str):
            return raw if _digest(raw) == done.full_sha256 else None
        # The file holds the text as `utf8` wrote it: escapes back to their bytes, or, for a
        # lone surrogate those cannot carry, the surrogate itself.
        for errors in ("surrogateescape", "surrogatepass"):
            try:
                text = raw.decode("utf-8", errors)
            except UnicodeDecodeError:
                continue
            if _digest(text) == done.full_sha256:
                return text
        logger.warning("%s no longer holds the result stored in it; storing it again", reference)
        return None

    async def _recut_stand_in(
        self, block: ToolResultBlock, limit: int, settings: RunSettings
    ) -> ToolResultBlock | None:
        """A result that is a stand-in ctxoffload left before this run (a session resumed in
        another process, a host that cut it at its tool hook), known from the session's
        record (`StoredOutputs`): as it is when it fits `limit`, else cut again from the file
        holding the whole output, which its notice then names. Stored again, it would be a
        copy of the notice whose own notice named that copy. None for any other result, and
        for a stand-in whose file cannot be read (it is then stored, as any result)."""
        services = self.services
        whole = await services.stored_outputs.whole_of(block.id, block.output)
        offloader = services.offloader
        if whole is None or len(whole.references) != 1:
            return None
        if not isinstance(offloader, ReferenceReader):
            return None
        if services.counter.count_text(str(block.output)) <= limit:
            return block
        (reference,) = whole.references
        try:
            raw = await offloader.read_reference(reference)
        except Exception as exc:
            logger.warning("could not read %s to cut call %s again: %s", reference, block.id, exc)
            return None
        full_text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
        cut = self._cut_again(block, full_text, reference, limit, settings)
        services.stored_outputs.note(block.id, cut, whole)
        return block.model_copy(update={"output": cut})

    def _cut_again(
        self,
        block: ToolResultBlock,
        full_text: str,
        reference: str,
        limit: int,
        settings: RunSettings,
        data: Sequence[tuple[str, str]] = (),
    ) -> str:
        """A result stored whole before (in `reference`) cut again to `limit`: its head and
        the notice naming that file."""
        return truncate_text(
            full_text,
            limit=limit,
            counter=self.services.counter,
            reference=reference,
            tool_name=block.name,
            tool_id=block.id,
            readers=settings.readers,
            preview=settings.config.preview,
            data=data,
        ).text


async def _with_results(
    msg: Msg, replace: Callable[[ToolResultBlock], Awaitable[ToolResultBlock]]
) -> Msg:
    """`msg` with each of its tool results replaced by `replace`'s; `msg` itself when none
    changes (or its content is a plain string)."""
    if isinstance(msg.content, str):
        return msg
    content = [await replace(b) if isinstance(b, ToolResultBlock) else b for b in msg.content]
    if all(a is b for a, b in zip(content, msg.content, strict=True)):
        return msg
    return msg.model_copy(update={"content": content})


def _estimated(bounds: tuple[int, int] | None) -> dict[str, Any]:
    """The fields of a truncation's event that say its `tokens_before` is an estimate, with
    the least and the most it may be (as a compaction's say it); none for an exact count."""
    if bounds is None:
        return {}
    return {"tokens_before_exact": False, "tokens_before_range": list(bounds)}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cut_by_us(msg: Msg, cut_texts: Collection[str]) -> bool:
    """Whether `msg`'s text is one ctxoffload cut (its metadata, or a digest remembered)."""
    digest = _digest(msg.text)
    return (msg.metadata or {}).get(TEXT_CUT) == digest or digest in cut_texts


def _result_of(block: ToolResultBlock, earlier: Truncation) -> bool:
    """Whether `block` is the result `earlier` cut: its stand-in (which names the file it went
    to) or the whole result again. Not another result that a model gave the same call id:
    some servers number calls per turn (`call_0` every turn), and cutting a new result from
    an old one's text would show the model the wrong output and store the new one nowhere."""
    output = block.output
    if output == earlier.block.output or output in earlier.stand_ins:
        return True
    # Known by what ctxoffload wrote, never by a notice in the text: a tool's output may
    # forge one naming the earlier file.
    if earlier.full_sha256:
        return _digest(rendered_text(output)) == earlier.full_sha256
    return rendered_text(output) == earlier.full_text


def _released(done: Truncation) -> Truncation:
    """`done` without its whole text, which its digest then stands for (see `release`)."""
    if done.full_sha256:
        return done
    return dataclasses.replace(done, full_text="", full_sha256=_digest(done.full_text))


def _long_strings(arguments: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each string among a call's arguments longer than a share could be (fewer characters
    than the floor's tokens always fit), with the keys and indexes that lead to it."""
    floor = FRESH_PREVIEW_FLOOR // 4
    return ((path, text) for path, text in _strings_of(arguments, ()) if len(text) > floor)


def _structured(arguments: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each argument of a call that is no string (a list, an object, a number), as its JSON,
    one item a line, when that is longer than a share could be."""
    floor = FRESH_PREVIEW_FLOOR // 4
    for key, value in arguments.items():
        if isinstance(value, str):
            continue
        try:
            text = _json_lines(value)
        except (TypeError, ValueError, RecursionError):
            continue  # (arguments come from JSON: not met)
        if len(text) > floor:
            yield (key,), text


def _json_lines(value: Any) -> str:
    """`value` as JSON, each item of a list (or each member of an object) on a line of its
    own: valid JSON, numbered lines a reader can go to, and no indentation to pay for."""
    dump = functools.partial(json.dumps, ensure_ascii=False, default=str)
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(dump(item) for item in value) + "\n]"
    if isinstance(value, dict) and value:
        members = (f"{dump(str(key))}: {dump(item)}" for key, item in value.items())
        return "{\n" + ",\n".join(members) + "\n}"
    return dump(value)


def _strings_of(
    value: Any, path: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each string inside a call's arguments, with the keys and indexes that lead to it."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings_of(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings_of(item, (*path, index))


def _value_at(value: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        value = value[step]
    return value


def _replaced(value: Any, path: Sequence[str | int], new: str) -> Any:
    """`value` with the item at `path` replaced by `new`; copies along the path only."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    if isinstance(value, Mapping):
        return {**value, step: _replaced(value[step], rest, new)}
    items = list(value)
    items[step] = _replaced(items[step], rest, new)  # type: ignore[index]
    return items
