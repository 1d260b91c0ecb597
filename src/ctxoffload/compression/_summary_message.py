"""The summary message: the state it carries across compressions, and its text.

A compression replaces the older messages with one summary message. Its text (the
`ContextConfig.summary_template`) names the context log, the lines that hold what left, and
the artifact trail of offloaded files; its mark (`metadata["ctxoffload"]`) carries the same
state, so a compressor that resumes a session from the context alone takes it over
(`SummaryState.adopt`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._disk.event_kinds import EventKind
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE
from .._disk.records import is_count
from .._disk.wording import spans_text
from ..messages import Msg
from ..text import defuse
from ..tokens import TokenCounter
from ._config import ContextConfig
from ._index import ArtifactIndex, FoundArtifact
from ._notes import NOTE_MARK, SUMMARY_NOTE
from ._summarize import bound_summary, cut_field
from ._summary_model import Summary
from ._tool_names import ReaderTools, how_to_search

__all__ = ["Artifact", "SummaryState", "human_size", "stored_since_compaction", "template_tags"]

_TEMPLATE_TAG = re.compile(r"</?[A-Za-z][\w-]*>")


def template_tags(template: str) -> tuple[str, ...]:
    """The tags a `summary_template` writes (`<context_summary>`, `</context_summary>`):
    what the text filled into it must not close or fake."""
    return tuple(sorted(set(_TEMPLATE_TAG.findall(template))))


def human_size(n: int) -> str:
    """`1536` -> `'1.5 KB'`."""
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{n:,} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class Artifact:
    """A file that holds content offloaded from the context."""

    path: str
    bytes: int
    source: str  # the producing tool's name, or "user message"
    lines: int | None = None

    def describe(self) -> str:
        """One line for the artifact trail."""
        lines = f", {self.lines:,} lines" if self.lines is not None else ""
        return f"{self.path} ({human_size(self.bytes)}{lines}, from {self.source})"


@dataclass
class SummaryState:
    """What the next summary message says besides the summary itself.

    Attributes:
        summary: the latest summary, if history has been compressed.
        reference: the context log the compressed messages went to.
        spans: the lines of that log they took, in order.
        artifacts: the files offloaded so far, oldest first.
        compressions: how many times history has been compressed.
        carried: the artifacts the current summary or its index names, checked again by the
            next compression (which replaces them).
        artifacts_cut: artifacts the index's budget left out so far (each listed in an
            `artifacts` event).
        messages_left: how many messages have left the context so far (the recency of the
            next ones' artifacts starts there).
        calls: the tool calls that have left the context so far, by tool name.
    """

    summary: Summary | None = None
    reference: str | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    compressions: int = 0
    carried: list[FoundArtifact] = field(default_factory=list)
    artifacts_cut: int = 0
    messages_left: int = 0
    calls: Counter[str] = field(default_factory=Counter)

    def newest_artifacts(self) -> list[Artifact]:
        """The artifact trail, newest first."""
        return list(reversed(self.artifacts))

    def record_offload(self, reference: str, line_span: tuple[int, int] | None) -> None:
        """Messages were appended to `reference`, at `line_span` when it is known."""
        self.reference = reference
        if line_span is not None and line_span not in self.spans:
            self.spans.append(line_span)

    def adopt(self, msg: Msg, max_chars: int) -> None:
        """Take over the state recorded in a summary message (a resumed session), unless a
        summary is held already; the summary is cut to `max_chars`."""
        if self.summary is not None:
            return
        marker = msg.metadata[NOTE_MARK]
        try:
            summary = Summary.model_validate(marker.get("summary", {}))
        except ValueError:
            return
        # A state saved by an older version may carry a summary of any size.
        self.summary = bound_summary(summary, max_chars)
        self.reference = marker.get("reference")
        self.spans = [(int(s[0]), int(s[1])) for s in marker.get("spans", [])]
        # Files stored after that summary, noted already (read back, or stored by this
        # process before its first compaction), stay after the ones it names.
        self.artifacts[:0] = [Artifact(**a) for a in reversed(marker.get("artifacts", []))]
        self.compressions = int(marker.get("compressions", 0))
        self.adopt_index(marker)

    def adopt_index(self, marker: dict[str, Any]) -> None:
        """Take over the artifact index state a note's mark carries (`index_mark`)."""
        found = marker.get("index")
        index: dict[str, Any] = found if isinstance(found, dict) else {}
        carried = (
            FoundArtifact.from_json(e) for e in index.get("carried", []) if isinstance(e, dict)
        )
        self.carried = [f for f in carried if f is not None]
        self.artifacts_cut = _int(index.get("cut_total"))
        self.messages_left = _int(index.get("messages_left"))
        calls = index.get("calls")
        if isinstance(calls, dict):
            self.calls = Counter({str(k): _int(v) for k, v in calls.items() if _int(v)})

    def index_mark(self) -> dict[str, Any]:
        """The artifact index state, as a note's mark carries it (`adopt_index`)."""
        return {
            "carried": [f.to_json() for f in self.carried],
            "cut_total": self.artifacts_cut,
            "messages_left": self.messages_left,
            "calls": dict(self.calls),
        }

    def note_index(self, index: ArtifactIndex) -> None:
        """Remember what a compaction's `index` left to check next time."""
        self.carried = list(index.carried)
        self.artifacts_cut += len(index.cut)

    def adopt_note(self, msg: Msg) -> None:
        """Take over the lines a window note names (a resumed session), so the summary that
        replaces the note names them too."""
        marker = msg.metadata[NOTE_MARK]
        if self.reference is None and isinstance(marker.get("reference"), str):
            self.reference = marker["reference"]
        for span in marker.get("spans", []):
            pair = (int(span[0]), int(span[1]))
            if pair not in self.spans:
                self.spans.append(pair)
        self.spans.sort()

    def spans_text(self) -> str:
        """The spans as text (`spans_text`): `"1-40, 52-60"`, or `"none"`."""
        return spans_text(self.spans) or "none"

    def trail(self, limit: int) -> str:
        """The artifact trail, newest first, at most `limit` files and a line for the rest."""
        artifacts = self.newest_artifacts()
        if not artifacts:
            return "none"
        lines = [f"- {a.describe()}" for a in artifacts[:limit]]
        if len(artifacts) > limit:
            lines.append(
                f"- ... and {len(artifacts) - limit} older files in the same session folder"
            )
        return "\n".join(lines)

    def render(
        self,
        summary: Summary,
        cfg: ContextConfig,
        counter: TokenCounter,
        *,
        budget: int,
        floor: int = 500,
        readers: ReaderTools | None = None,
    ) -> Msg:
        """The summary message: `cfg.summary_template` filled in, within `budget` tokens (at
        least `floor`), marked with this state; how to search the context log said with
        `readers`, the reader tools the agent has (`how_to_search`)."""
        reference = self.reference or "(not kept: no offloader was configured)"
        # No tool's call is written for a log that was not kept.
        search = how_to_search(reference, readers if self.reference else None, compact=True)
        fields = summary.model_dump()
        text = ""
        # Shrink the fields, then the artifact trail, until the rendered summary fits its
        # budget, so that compression always makes room; the originals are on disk, and every
        # offloaded file is still named by the marker that replaced its content.
        trail = cfg.artifact_trail_limit
        attempts = [(cap, trail) for cap in (None, 4000, 2000, 1000, 500, 250)]
        attempts += [(250, n) for n in (5, 1, 0) if n < trail]
        # A field cut here is whole in the session's events.jsonl (its `summary` event).
        why = (
            f"not shown; whole in the {EVENTS_FILE} beside {CONTEXT_FILE}"
            if self.reference is not None
            else "cut to fit"
        )
        # The fields are a model's answer about what tools and pages wrote: they may close
        # no tag of the template, nor open or close any wrapper of ctxoffload's.
        tags = template_tags(cfg.summary_template)
        tried: tuple[Any, ...] | None = None
        for cap, trail_limit in attempts:
            capped = {k: v if cap is None else cut_field(v, cap, why) for k, v in fields.items()}
            # A cap no field reaches renders the text of the attempt before, over the budget.
            if (attempt := (*capped.values(), trail_limit)) == tried:
                continue
            tried = attempt
            shown = {k: defuse(v, *tags) for k, v in capped.items()}
            text = cfg.summary_template.format(
                **shown,
                context_path=reference,
                line_span=self.spans_text(),
                how_to_search=search,
                artifacts=defuse(self.trail(trail_limit), *tags),
            )
            if counter.count_text(text) <= max(budget, floor):
                break
        metadata = {
            NOTE_MARK: {
                "kind": SUMMARY_NOTE,
                "summary": fields,
                "reference": self.reference,
                "spans": [list(s) for s in self.spans],
                "artifacts": [vars(a) for a in self.newest_artifacts()],
                "compressions": self.compressions,
            }
        }
        return Msg(role="user", content=text, metadata=metadata)

    def with_index(self, msg: Msg, index: ArtifactIndex, events_file: str | None) -> Msg:
        """`msg` (a summary message, or a window note) followed by the artifact index, its
        own text unchanged; the index's state in its mark and in this state."""
        self.note_index(index)
        text = index.render(events_file)
        marker = {**msg.metadata[NOTE_MARK], "index": self.index_mark()}
        content = f"{msg.text}\n\n{text}" if text else msg.text
        return msg.model_copy(update={"content": content, "metadata": {NOTE_MARK: marker}})


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def stored_since_compaction(events: Iterable[Mapping[str, Any]]) -> list[Artifact]:
    """The files a session's record says were stored whole since its latest compaction,
    oldest first: the next summary lists them after those the latest one names, as an
    unbroken run's would, so a restarted process (a projector's, or the `Agent`'s resumed
    from its saved state) notes them before its first compaction
    (`Compressor.resume`)."""
    trail: list[Artifact] = []
    for event in events:
        kind = event.get("kind")
        if kind == EventKind.COMPRESSION:
            trail = []
        elif kind == EventKind.TRUNCATION:
            trail.extend(_stored_file(event))
    return trail


def _stored_file(event: Mapping[str, Any]) -> list[Artifact]:
    """The file a `truncation` event says it stored whole, as the artifact trail names it
    (none when it names no file, or is of an older shape that does not say its size)."""
    reference, size, lines = (
        event.get("reference"),
        event.get("bytes_total"),
        event.get("lines_total"),
    )
    if not isinstance(reference, str) or not is_count(size):
        return []
    name = event.get("tool_name") or "a tool"
    argument = event.get("argument")
    source = f"{name} argument" if isinstance(argument, str) else name
    return [Artifact(reference, size, source, lines if is_count(lines) else None)]
