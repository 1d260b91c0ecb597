"""The typed record every session event kind is declared with (`events.py` declares them).

A kind is a subclass of `Event` naming its `kind` and annotating its fields; declaring it
registers it in `KINDS`. A record is built with its fields as keywords (a name its kind does
not declare is a TypeError), read from a line with `from_json` (what it does not declare
kept in `extra`), and written back with `to_json` in the order it was given or read: so a
line an older writer wrote, or a newer one, goes back byte for byte.

Light on purpose: no `dataclasses` (~17 ms of start-up) and no `typing` at run time.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ClassVar, TypeGuard

__all__ = ["KINDS", "Event", "is_count", "line_runs"]


KINDS: dict[str, type[Event]] = {}
"""Every declared kind -> its record class (filled as `events.py` declares its classes)."""


class Event:
    """An event of the session record; as a class, the reading of a kind this version does
    not know (its sentence is its kind).

    Build one with the fields as keywords (`Truncation(tool_id="c1", ...)`): a name the
    kind does not declare is a TypeError, so a writer cannot misspell a field. Only the
    fields given are written, in the order given: a field a writer leaves out stays out of
    its line, one it gives as None is written as null, as before records existed.

    Attributes:
        kind: the `kind` written on the line.
        schema: the version of the kind's fields (see the module docstring).
        nested: `show` prints the event under the step that made it (indented).
        log_level: the level the `ctxoffload` logger says it at.
        extra: fields of the line this version does not declare (a newer writer's).
    """

    kind: ClassVar[str] = ""
    schema: ClassVar[int] = 1
    nested: ClassVar[bool] = False
    log_level: ClassVar[str] = "DEBUG"
    fields_declared: ClassVar[tuple[str, ...]] = ("time", "writer")
    """The names a record of the kind may hold: `time`, `writer`, then its own."""

    time: str | None = None
    writer: dict[str, Any] | None = None

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        # Each class's own annotations (Python 3.10+), over its bases: a kind's fields
        # include those of the field groups it is made of (`_MovedLines`, `_TokenChange`).
        fields = [
            name
            for klass in reversed(cls.__mro__)
            if issubclass(klass, Event) and klass is not Event
            for name in klass.__annotations__
        ]
        cls.fields_declared = tuple(dict.fromkeys(["time", "writer", *fields]))
        for name in fields:
            setattr(cls, name, None)  # a field the line lacks reads as None
        if "kind" in cls.__dict__:  # a kind, not a group of fields
            KINDS[cls.kind] = cls

    def __init__(self, **values: Any) -> None:
        unknown = [name for name in values if name not in self.fields_declared]
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no field {unknown[0]!r}: its fields are "
                f"{', '.join(self.fields_declared)}"
            )
        self.extra: dict[str, Any] = {}
        self._order: tuple[str, ...] = tuple(values)
        self.__dict__.update(values)

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> Event:
        """The record of a line read from events.jsonl (a dict that `is_event`): declared
        fields as attributes, the rest in `extra`, the order kept for `to_json`."""
        record = cls.__new__(cls)
        record.extra = {}
        record._order = tuple(line)
        for name, value in line.items():
            if name == "kind":
                continue
            if name in cls.fields_declared:
                record.__dict__[name] = value
            else:
                record.extra[name] = value
        if cls is Event:  # a kind this version does not know: the line names it
            record.__dict__["kind"] = str(line.get("kind"))
        return record

    def to_json(self) -> dict[str, Any]:
        """The line's object: `kind` first unless the line read had it elsewhere, then the
        fields as given or read, extra ones included where they were."""
        kind = self.kind
        order = self._order if "kind" in self._order else ("kind", *self._order)
        return {
            name: kind if name == "kind" else self.field(name)
            for name in order
            if name == "kind" or name in self.extra or name in self.__dict__
        }

    def fields(self) -> dict[str, Any]:
        """The fields as `to_json` writes them, without `kind`: what `record_event` takes."""
        return {name: value for name, value in self.to_json().items() if name != "kind"}

    def field(self, name: str) -> Any:
        """A field by name, declared or extra; None when the line does not hold it."""
        if name in self.extra:
            return self.extra[name]
        return self.__dict__.get(name)

    def sentence(self) -> str:
        """The one line people read for this event."""
        return self.kind

    def notes(self) -> list[str]:
        """Further sentences `show` prints under the event's line (`one_line` joins them)."""
        return []

    def one_line(self) -> str:
        """The sentence and its notes on one line: what a reader of one line per event says
        (the `ctxoffload` logger, a command's one-line answer)."""
        return "; ".join([self.sentence(), *self.notes()])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"


# -- fields read back ----------------------------------------------------------------------
# A line of the record may be of another release's shape or damaged: a reader checks a field's
# type before it relies on it, by these rules.


def is_count(value: object) -> TypeGuard[int]:
    """Whether a field read from the record is a count: an int of 0 or more (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_run(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(is_count(n) for n in value)


def line_runs(lines: object, spans: object = None) -> list[tuple[int, int]]:
    """The lines an event that moved messages names, as runs `(first, last)`: its `spans`
    (each run `[first, last]`, written when the lines are not consecutive) when it holds
    them, else its `lines` (`[first, last]`); none when neither reads (a line cut short,
    another shape)."""
    if isinstance(spans, list) and spans and all(_is_run(run) for run in spans):
        return [(run[0], run[1]) for run in spans]
    if _is_run(lines):
        return [(lines[0], lines[1])]  # type: ignore[index]
    return []
