"""A compaction's artifact index: the artifacts of what leaves (with those the note it
replaces carried, and which of them are files the workspace stored), and the index of them
within the compaction's budget and time (`_index` builds it)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..messages import Msg
from ._config import ContextConfig
from ._index import ArtifactIndex, FoundArtifact, IndexClock, events_file, find_artifacts
from ._persisted import Persisted
from ._services import RunServices
from ._summary_message import SummaryState

__all__ = ["FINISH_SHARE", "artifact_index", "index_clock", "leaving_artifacts"]

FINISH_SHARE = 0.05
"""The share of `summary_timeout` the artifact index leaves at the end of a compaction, for
writing its events and assembling the context."""


def index_clock(deadline: float, cfg: ContextConfig) -> IndexClock:
    """How long the artifact index of a compaction due by `deadline` may search."""
    return IndexClock(deadline - FINISH_SHARE * cfg.summary_timeout)


async def leaving_artifacts(
    services: RunServices,
    leaving: Sequence[Msg],
    lines: Mapping[str, int] | None,
    state: SummaryState,
) -> list[FoundArtifact]:
    """The artifacts of a compaction that moves `leaving` out (a summary's, or a window
    note's), with those `state` carries from the note it replaces; `state` counts the
    messages and calls that left, and the files the workspace stored (`StoredFiles`) learn
    which of them they are."""
    scanned = services.scanned.of(leaving)
    found, calls = find_artifacts(leaving, lines, recency=state.messages_left, scanned=scanned)
    state.messages_left += len(leaving)
    state.calls.update(calls)
    seen = {(f.kind, f.value) for f in found}
    carried = [replace(f, fresh=False) for f in state.carried if (f.kind, f.value) not in seen]
    await services.stored_files.learn(f.value for f in (*carried, *found))
    return carried + found


def artifact_index(
    services: RunServices,
    candidates: Sequence[FoundArtifact],
    state: SummaryState,
    summary_text: str,
    kept: Sequence[Msg],
    persisted: Persisted,
    cfg: ContextConfig,
    window: int,
    room: int | None = None,
    least: int = 0,
    spare: int = 0,
    *,
    clock: IndexClock | None = None,
) -> ArtifactIndex:
    """The artifact index of `candidates` (`leaving_artifacts`): each checked against
    `summary_text` and the `kept` messages, within the config's index budget and half of
    `room` (the tokens left under the trigger, when the caller keeps the context under it),
    but never below `least` (what the caller set aside for the index)."""
    budget = cfg.artifact_index_budget(window)
    if room is not None:
        # Half the room under the trigger at most: the rest is for the turns to come.
        budget = min(budget, room // 2)
        spare = max(0, min(spare, room // 2 - budget))
    return ArtifactIndex.build(
        candidates,
        state.calls,
        summary_text=summary_text,
        kept=kept,
        counter=services.counter,
        budget=max(budget, least),
        events_file=events_file(persisted.reference),
        stored=services.stored_files.files(),
        cut_before=state.artifacts_cut,
        kept_scanned=services.scanned.of(kept),
        extra=spare,
        clock=clock or index_clock(time.monotonic() + cfg.summary_timeout, cfg),
    )
