"""`WorkspaceSession`, the OpenAI Agents SDK's `Session` on a ctxoffload workspace (the
door's face is `ctxoffload.integrations.openai_agents`): the conversation's items as an
append-only log, history.jsonl, its records and how they fold to the live items.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .._doors.checks import checked_config, checked_workspace, not_a_capability
from .._doors.identity import conversation_session
from .._doors.opening import record_door
from ..compression import Compressor, ContextConfig
from ..exceptions import ConfigError
from ..formats.responses import from_responses
from ..messages import Msg, ToolResultBlock
from ..model import ChatModel
from ..tokens import get_token_counter
from ..workspace import HistoryLog, Workspace
from ._openai_agents_filter import DOOR, OffloadingInputFilter, sdk_run
from ._openai_agents_items import (
    as_history,
    as_item,
    call_names,
    cut_item,
    item_key,
    output_call,
    projected_items,
)
from ._openai_agents_summary import summary_writer
from ._reading import readers_for

__all__ = ["WorkspaceSession"]

logger = logging.getLogger("ctxoffload")


class WorkspaceSession:
    """The SDK's `Session` (its protocol: `get_items`, `add_items`, `pop_item`,
    `clear_session`, and `run_compaction`) on a ctxoffload workspace: the conversation's items
    are an append-only log, the session's history.jsonl (`HistoryLog`), beside what the input
    filter offloads for the same session.

    So one folder (or bucket, or database) holds a conversation whole: its items, the tool
    outputs stored whole and the summaries' context.jsonl; a run resumed in a new process
    (`Runner.run(agent, ..., session=WorkspaceSession(ws, "nightly"))`) starts from them.

    - `add_items` appends one line holding the items given, whole or absent whatever kills
      the process, and rewrites nothing: it costs what it adds, at turn 200 as at turn 10.
    - A `function_call_output` over the config's `tool_result_limit` is stored whole once, as
      the session's `tool_result-<call id>.txt` (the file the input filter of the session
      writes for it: the same bytes are one file), and the item keeps the head and the notice
      naming that file, what the model is sent; only then is the item written. With
      `keep_whole_outputs=True` items are kept exactly as the SDK gave them.
    - `pop_item`, `clear_session` and `run_compaction` append a record too (the item removed;
      a new start holding what stays): history already written is never rewritten.
    - Several objects (workers, processes) may write one conversation: a record made from
      items another writer removed or replaced meanwhile is skipped by every reader, so two
      compactions at once leave one summary (the second finds nothing to do) and two pops
      remove two items.
    - `get_items` reads what the log gained since this object last read it (a new object
      reads it once), so `get_items(limit)` costs the items it returns.

    `run_compaction` keeps the items themselves small: past the config's trigger (or at
    once, with `{"force": True}`) the older items go to the session's context.jsonl and one
    summary item stands for them (the five-field summary with the artifact index, naming the
    lines that hold them). The SDK calls it after each turn where a Responses-API model
    answered; with any other model call it yourself (`await session.run_compaction()`).

    `input_filter()` gives the `OffloadingInputFilter` of the same conversation: one
    ctxoffload session, without naming it twice.

    Args:
        workspace: where the items are kept: a `Workspace` that is a `HistoryLog` (every
            workspace of ctxoffload is).
        session_id: the conversation (one that is no plain name gets a safe session of its
            own, `session_id_for`).
        config: when `run_compaction` summarises (its trigger and window), and the
            `tool_result_limit` over which an output is kept as head and notice. Without a
            `context_window` in it, `run_compaction` summarises only when forced (as if the
            items filled the window): no trigger can be passed.
        summary_model: what writes the summaries of `run_compaction` and of its
            `input_filter()`: an SDK `Model` or a model name, or a ctxoffload `ChatModel`;
            left out, the agent's own model as that filter saw it (before any run of it,
            the extract); False for the extractive summary.
        keep_whole_outputs: keep each item as the SDK gave it, a big output whole in the
            items too (and again in its file, where the input filter stored it).

    Raises:
        ConfigError: `workspace` is not a `HistoryLog`, or `summary_model` is none of the
            above.
    """

    session_settings: Any = None

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | Any | None = None,
        keep_whole_outputs: bool = False,
    ) -> None:
        workspace = checked_workspace(workspace, DOOR, adapter="WorkspaceSession")
        if not isinstance(workspace, HistoryLog):
            raise not_a_capability(
                workspace,
                HistoryLog,
                role="workspace",
                fix="pass a ctxoffload workspace (LocalWorkspace, InMemoryWorkspace, "
                "ObjectStoreWorkspace, SqlWorkspace), or add those methods to yours",
            )
        self.workspace = workspace
        self.session_id = conversation_session(session_id)
        self.config = checked_config(config)
        self.keep_whole_outputs = keep_whole_outputs
        self._conversation = session_id
        self._summaries = summary_writer(summary_model, self.config.context_window)
        self._log = workspace  # the same object, as the capability the items are kept with
        self._compressor = Compressor(
            self.config,
            model=self._summaries.model(),
            offloader=workspace,
            session_id=self.session_id,
            counter=get_token_counter(None),
            # The tools its filter gives (`input_filter().tools`), which its notices name.
            reader_tools=readers_for(workspace, self.config),
        )
        # How a big output is cut: as this session's compressor cuts it, or as the input
        # filter bound to it (`input_filter`) cuts what it sends, so both keep the same text
        # (and the filter sends that cut without making it again).
        self._cut_output: Callable[[ToolResultBlock, Msg], Awaitable[ToolResultBlock]] = (
            self._own_cut
        )
        self._filter: OffloadingInputFilter | None = None  # the latest `input_filter()`
        self._announced = False  # whether this object recorded its `door` event
        self._items = _LiveItems()
        self._lock = asyncio.Lock()

    def input_filter(
        self,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | Any | None = None,
        **options: Any,
    ) -> OffloadingInputFilter:
        """The `OffloadingInputFilter` of this conversation, for the run's `RunConfig`: on this
        session's workspace and ctxoffload session, so the items, the outputs stored whole
        and the summaries are one session's, and a big output is one file. The session then
        keeps each big output as this filter sends it (the same head, notice and file).

        Args:
            config: the filter's config; default the session's.
            summary_model: the model that writes the filter's summaries (as the filter
                takes it); default the session's.
            **options: the filter's other arguments (`max_output_chars`, `memory`).

        Raises:
            ConfigError: `session_id` among `options`: the filter's session is this one.
        """
        if "session_id" in options:
            raise ConfigError(
                f"input_filter(session_id={options['session_id']!r}): the filter of a "
                f"WorkspaceSession works on its session, {self.session_id!r}; leave it out"
            )
        offload = OffloadingInputFilter(
            self.workspace,
            config=config or self.config,
            summary_model=summary_model if summary_model is not None else self._given_model(),
            **options,
        )
        offload._name(self.session_id, self._conversation)

        async def cut(block: ToolResultBlock, message: Msg) -> ToolResultBlock:
            run = await offload._run_state()
            return await run.projector.offload_tool_result(block, message=message)

        self._cut_output = cut
        self._filter = offload
        return offload

    def _given_model(self) -> object:
        """The session's `summary_model` for its filter: the model it adapted, or what was
        given (None, False)."""
        fixed = self._summaries.fixed
        return fixed if fixed is not None else self._summaries.given

    async def _begin(self) -> None:
        """In an SDK run, with a filter of this session: the run begins writing the session
        here if it has not yet (the SDK reads the items before its first model call), so a
        second live run is refused before it writes anything.

        Raises:
            SessionBusyError: another live run writes the session.
        """
        if self._filter is not None and sdk_run() is not None:
            await self._filter._run_state()

    async def _announce(self) -> None:
        """Before this object's first event: the `door` event that opens the record (with a
        filter of this session, that filter's run records it)."""
        if self._filter is not None:
            await self._filter._run_state()
        elif not self._announced:
            self._announced = True
            await record_door(self.workspace, DOOR, self.session_id, self._conversation)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation's items, oldest first; with `limit` (or the `limit` of
        `session_settings`, when `limit` is None), only the latest `limit` (none for 0; all
        for a negative one, as the SDK's `SQLiteSession` gives)."""
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        await self._begin()
        async with self._lock:
            await self._read_new()
            live = self._items.live
            if limit is not None and limit >= 0:  # a negative limit is none, as in SQLite
                live = live[max(len(live) - limit, 0) :] if limit else []
            return [json.loads(text) for _, text in live]

    async def add_items(self, items: list[Any]) -> None:
        """Append `items` (dicts or the SDK's pydantic items) to the conversation: one line
        of history.jsonl, each big output first stored whole and kept as head and notice
        (unless `keep_whole_outputs`)."""
        if not items:
            return
        await self._begin()
        async with self._lock:
            given = [as_item(item) for item in items]
            kept = given if self.keep_whole_outputs else await self._lean(given)
            await self._append({_ADD: kept})

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (a record naming it is appended); None when
        there is none."""
        await self._begin()
        async with self._lock:
            while True:  # again when another writer removed or replaced that item first
                await self._read_new()
                if not self._items.live:
                    return None
                address, text = self._items.live[-1]
                if await self._append({_POP: list(address)}):
                    return json.loads(text)

    async def clear_session(self) -> None:
        """Forget the conversation's items: a new, empty start is appended (what was
        offloaded for it stays, and so do the earlier lines of its history.jsonl)."""
        await self._begin()
        async with self._lock:
            while True:  # again when another writer removed or replaced an item first
                await self._read_new()
                if not self._items.live:
                    return
                if await self._append({_BASE: [], _REPLACES: self._items.addresses()}):
                    return

    async def run_compaction(self, args: Any = None) -> None:
        """Summarise the older items once they pass the config's trigger, or at once with
        `{"force": True}` (the SDK's `OpenAIResponsesCompactionArgs`; its other fields do not
        apply: the summary is made here, with any model). The items summarised are appended
        to the session's context.jsonl before a new start is appended to history.jsonl,
        holding the summary and the items kept; the newest turn is kept as it is.

        One compaction of the conversation wins, whichever objects or processes call it: one
        whose items another writer removed or replaced meanwhile (another worker's
        compaction, a `pop_item`, a `clear_session`) appends nothing, or what it appends is
        skipped by every reader (`_LiveItems.fold`), and it returns as one that found nothing
        to do, as the SDK's own compaction session skips a replacement whose items changed.
        Items added meanwhile stay, after the summary."""
        force = bool(args.get("force")) if isinstance(args, dict) else False
        await self._begin()
        async with self._lock:
            await self._read_new()
            read = self._items.addresses()  # what the summary replaces; not what comes later
            items = [json.loads(text) for _, text in self._items.live]
            if not items:
                return
            history, originals = as_history(None, items)
            config: ContextConfig | None = None
            try:
                self._compressor.window()
            except ConfigError:
                # No window known (no `config=` with a context_window): no trigger to pass.
                # The SDK calls this after every turn of a Responses model: the run goes on.
                if not force:
                    return
                # Forced: as if the items filled the window, as `Agent.compact` does.
                tokens = max(1, self._compressor.count(history))
                config = self.config.model_copy(update={"context_window": tokens})
            await self._announce()
            # The agent's own model, where the session's filter has seen it, writes the
            # summary unless the session was given one.
            seen = self._filter._agent_model if self._filter is not None else None
            self._compressor.model = self._summaries.model(seen)
            result = await self._compressor.maybe_compress(history, force=force, config=config)
            if not result.compressed:
                return
            kept = [as_item(item) for item in projected_items(result.messages, history, originals)]
            await self._read_new()  # what another writer appended while this one summarised
            live = {address for address, _ in self._items.live}
            if not {_address(a) for a in read} <= live or not await self._append(
                {_BASE: kept, _REPLACES: read}
            ):
                logger.info(
                    "compaction of session %s skipped: another writer changed its items "
                    "meanwhile (another compaction?); what it summarised stays in context.jsonl",
                    self.session_id,
                )

    async def _own_cut(self, block: ToolResultBlock, message: Msg) -> ToolResultBlock:
        """A big output cut by this session's own compressor (no filter bound)."""
        await self._announce()
        return await self._compressor.process_tool_result(block)

    async def _read_new(self) -> set[int]:
        """Fold in the records history.jsonl gained since this object last read it.

        Returns:
            The lines among them skipped as stale (`_LiveItems.fold`).
        """
        items = self._items
        skipped: set[int] = set()
        for line, record in await self._log.read_history(
            self.session_id, after=items.next_line - 1
        ):
            if not items.fold(line, record):
                skipped.add(line)
        return skipped

    async def _append(self, record: dict[str, Any]) -> bool:
        """Append `record` and fold it in, after any other writer's lines before it.

        Returns:
            Whether it applied: False when a line before it had removed or replaced an item
            it names (it stays in the log, skipped by every reader).
        """
        line = await self._log.append_history(self.session_id, record)
        if line == self._items.next_line:
            return self._items.fold(line, record)
        return line not in await self._read_new()

    async def _lean(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`items` with each output over the limit stored whole and cut to what the model
        is sent (an output that could not be stored stays whole)."""
        names = {**self._items.names, **call_names(items)}
        if any(output_call(item) not in (None, *names) for item in items):
            await self._read_new()  # its call may be in another writer's latest line
            names = {**self._items.names, **call_names(items)}
        out: list[dict[str, Any]] = []
        for item in items:
            if output_call(item) is None:
                out.append(item)
                continue
            (msg,) = from_responses([item])
            (block,) = msg.tool_results
            block = block.model_copy(update={"name": names.get(item["call_id"], block.name)})
            # The output's message as the filter makes it (`as_history`), named by the same key.
            msg = msg.model_copy(update={"content": [block], "id": item_key(item)})
            cut = await self._cut_output(block, msg)
            out.extend(
                [item]
                if cut.output == block.output
                else cut_item(item, Msg(role="tool", content=[cut]))
            )
        return out


_ADD, _POP, _BASE, _REPLACES = "add", "pop", "base", "replaces"
"""The records of a `WorkspaceSession`'s history.jsonl, one a line: `{"add": [item, ...]}`
(items appended), `{"pop": [line, index]}` (the item that add record held at that index is
removed), `{"base": [item, ...], "replaces": [[line, index], ...]}` (a new start: those items
first, in place of the ones named; `clear_session` with none, `run_compaction` with the
summary and the items kept). An item is known by where it was written, so every reader folds
the same records to the same items."""


class _LiveItems:
    """The items a session's history.jsonl holds now, folded from its records in order:
    each item's address `(line, index)` and JSON; the next line to read; the tool name of
    each call id seen (an output's notice names its tool)."""

    def __init__(self) -> None:
        self.live: list[tuple[tuple[int, int], str]] = []
        self.next_line = 1
        self.names: dict[str, str] = {}

    def addresses(self) -> list[list[int]]:
        """The addresses of the live items, as a record names them."""
        return [list(address) for address, _ in self.live]

    def fold(self, line: int, record: Any) -> bool:
        """Apply the record on `line` (one that is not a record of this log is skipped).

        A record that names items (`pop`, `base` with its `replaces`) was made from the items
        its writer read: it applies only if every item it names is still live here. Two
        writers that read the same items and append one after the other (two workers
        compacting at once, a pop beside a compaction) are so told apart by the log's order:
        the first applies, the second is skipped, in every reader alike, and its writer learns
        it (`False`) and reads again. Nothing is lost: a skipped record stays in the log, the
        items it names stay live, and what a compaction summarised is in context.jsonl.

        Returns:
            Whether the record changed nothing it could not (False: skipped, as stale).
        """
        self.next_line = max(self.next_line, line + 1)
        if not isinstance(record, dict):
            return True
        added, popped, replaced = record.get(_ADD), record.get(_POP), record.get(_REPLACES)
        if isinstance(added, list):
            self.live.extend(self._entries(line, added))
        elif _BASE in record and isinstance(record[_BASE], list) and isinstance(replaced, list):
            gone = {_address(a) for a in replaced}
            rest = [entry for entry in self.live if entry[0] not in gone]
            if len(rest) + len(gone) != len(self.live):  # an item it names has gone
                return False
            self.live = [*self._entries(line, record[_BASE]), *rest]
        elif _address(popped) is not None:
            at = _address(popped)
            for k in range(len(self.live) - 1, -1, -1):
                if self.live[k][0] == at:
                    del self.live[k]
                    return True
            return False
        return True

    def _entries(self, line: int, items: list[Any]) -> list[tuple[tuple[int, int], str]]:
        self.names.update(call_names(items))
        return [
            ((line, index), json.dumps(item, ensure_ascii=False))
            for index, item in enumerate(items)
            if isinstance(item, dict)  # else not an item: a hand edit
        ]


def _address(value: Any) -> tuple[int, int] | None:
    """`[line, index]` as a record writes an item's address, or None."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    ):
        return (value[0], value[1])
    return None
