"""The artifacts of messages: every file path, URL, command and identifier a message names,
so that what leaves the context stays named in the next one.

A summary, model-written or extractive, keeps the gist of what left and drops most of its
paths, commands and ids: the model then no longer knows which file holds the answer, even
though the file is on disk. Before a compaction replaces history, `find_artifacts` takes,
without a model, the artifacts of the messages that leave; the artifact index
(`_artifact_index`) names, with the line of context.jsonl where each can be read back, those
the next context names nowhere else.

What counts as an artifact (linear-time patterns, over the text `message_lines` gives):

- `path`: an absolute path with two components or more (`/mnt/exports/a.csv`, `~/x/y`), or
  a relative one ending in an extension (`src/app/main.py`);
- `url`: `http(s)://`, `s3://`, `gs://`, `file://` addresses;
- `command`: a tool call's `command` / `cmd` / `script` argument (a list is joined), a line
  of a fenced `bash` / `sh` / `shell` / `console` block, a line starting with `$ `;
- `id`: keys such as `ORD-58213` or `PROJ-12`, codes such as `E1234` or `HTTP404`, UUIDs,
  and hexadecimal hashes of 7 to 64 digits holding a letter and a digit.

Tool calls are tallied by name (`bash x7`) rather than listed: their commands and paths are
artifacts of their own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._tokens.tracker import kept_entries, outgrown
from ...messages import Msg, ToolCallBlock
from ...text import message_text

__all__ = [
    "ARTIFACTS_PER_MESSAGE",
    "CUT_MARK",
    "NEWLINE_MARK",
    "ArtifactCache",
    "FoundArtifact",
    "Scanned",
    "find_artifacts",
    "message_artifacts",
    "named_values",
    "scan_messages",
]

ARTIFACTS_PER_MESSAGE = 256
"""The most artifacts taken from one message. A message that holds more (a listing, a log)
is a file's worth of names: its line in context.jsonl, named by the index, holds them all."""

_VALUE_CHARS = 200
"""An artifact longer than this (a command of many lines) is cut, with ` […]`."""
CUT_MARK = " […]"
"""What ends an artifact cut to its first 200 characters."""
NEWLINE_MARK = " ⏎ "
"""What stands for a line break inside an artifact (a command of several lines)."""

_URL = re.compile(r"\b(?:https?|s3|gs|file)://[^\s<>\"'`|()\[\]{}]+")
_ABSOLUTE = re.compile(r"(?<![\w/.~:-])(?:~|\.\.?)?(?:/[\w.@+-]+){2,}/?")
_RELATIVE = re.compile(r"(?<![\w/.~:-])[\w.-]+(?:/[\w.@+-]+)+\.[A-Za-z][A-Za-z0-9]{0,7}\b")
_KEY = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{2,}\b")
_CODE = re.compile(r"\b[A-Z]{1,5}\d{3,6}\b")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HASH = re.compile(r"\b[0-9a-f]{7,64}\b")
_FENCE = re.compile(r"^\s*```\s*(\w*)")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)")
_SHELLS = frozenset({"bash", "sh", "shell", "console", "zsh"})
_COMMAND_KEYS = ("command", "cmd", "script", "commands")
_TRAILING = ".,;:!?'\""
_KINDS = ("path", "url", "command", "id")


@dataclass(slots=True)
class FoundArtifact:
    """An artifact of the messages that left, and where it can be read back.

    Attributes:
        kind: `path`, `url`, `command` or `id`.
        value: the artifact as it was written (a long one cut to 200 characters).
        line: the line of context.jsonl holding the (newest) message that names it, when
            known.
        mentions: how many of the messages that left name it.
        recency: larger is newer: the order of the newest message naming it, across
            compressions.
        fresh: whether a message that leaves with this compaction names it (False: it is
            carried from the summary and index the compaction replaces, which named it; the
            index counts a file the workspace stored as fresh: it never makes way).
        stored: whether it is a file the workspace stored for the session (the index
            decides it at each compaction from `ArtifactIndex.build`'s `stored`, never from
            the value): it holds what left, leads the index's order and never makes way.
    """

    kind: str
    value: str
    line: int | None = None
    mentions: int = 1
    recency: int = 0
    fresh: bool = True
    stored: bool = False

    def to_json(self) -> dict[str, Any]:
        """The entry as an event and a summary's mark hold it."""
        return {
            "kind": self.kind,
            "value": self.value,
            "line": self.line,
            "mentions": self.mentions,
            "recency": self.recency,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> FoundArtifact | None:
        """An entry read back from a mark; None for one that is not well formed."""
        kind, text = value.get("kind"), value.get("value")
        if kind not in _KINDS or not isinstance(text, str) or not text.strip():
            return None
        # One line, as the scan writes every value: a mark edited by hand cannot add a row.
        text = _one_line(text)
        line = value.get("line")
        mentions, recency = value.get("mentions"), value.get("recency")
        return cls(
            kind,
            text,
            line if isinstance(line, int) and not isinstance(line, bool) else None,
            mentions if isinstance(mentions, int) and mentions > 0 else 1,
            recency if isinstance(recency, int) else 0,
        )

    def where(self) -> str:
        """`line 41`, or `no line` when the offloader could not say."""
        return f"line {self.line}" if self.line is not None else "no line"


def _cut(value: str) -> str:
    """One line of at most 200 characters: a command of several lines keeps them, joined by
    ` ⏎ ` (the index is one entry a line), and a longer one is cut with ` […]`."""
    value = NEWLINE_MARK.join(part.strip() for part in value.strip().splitlines() if part.strip())
    return value if len(value) <= _VALUE_CHARS else value[:_VALUE_CHARS] + CUT_MARK


def _commands_of(call: ToolCallBlock) -> Iterable[str]:
    arguments = call.input if isinstance(call.input, Mapping) else {}
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            # ["bash", "-lc", "pytest -q"]: the script is what was run.
            shell = len(value) == 3 and value[1] in ("-c", "-lc")
            value = value[2] if shell else " ".join(value)
        if isinstance(value, str) and value.strip():
            yield value.strip()


# The same patterns for RE2, run once over a message's whole text (linear, and 3-7x faster
# than `re` on these: none starts with a literal). RE2 has no lookbehind: the character
# before a path is matched instead (or the line's start), and the path is group 1. `\w` is
# spelled `[\pL\pN_]` for RE2, as Python's `re` reads it on str: letters of any script
# (`\b` stays ASCII in RE2: an id or an extension right before a non-ASCII letter ends
# there, where `re` would not end it).
_W = r"\pL\pN_"
_PATH_LEAD = rf"(?m)(?:^|[^{_W}/.~:-])"
_PATH_BODIES = {  # each path pattern's path, and what must follow it
    "absolute": (rf"(?:~|\.\.?)?(?:/[{_W}.@+-]+){{2,}}/?", ""),
    "relative": (rf"[{_W}.-]+(?:/[{_W}.@+-]+)+\.[A-Za-z][A-Za-z0-9]{{0,7}}", r"\b"),
}
_RE2_PATTERNS = {
    "url": _URL.pattern,
    **{name: rf"{_PATH_LEAD}({body}){tail}" for name, (body, tail) in _PATH_BODIES.items()},
    "key": _KEY.pattern,
    "code": _CODE.pattern,
    "uuid": _UUID.pattern,
    "hash": _HASH.pattern,
}
# In an ASCII text a path's span is read without the capture group, which costs RE2 a second
# pass over each match (about a third of the paths' time): a match is the path, or the one
# character before it and the path. That character is never one the path may start with (the
# lead excludes them all), so the path starts a byte later exactly when the match's first
# byte is not one of these.
_PATH_FIRST = {
    "absolute": frozenset(b"~./"),
    "relative": frozenset(b"._-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
}
# Two marks beside the patterns, which find no artifact but say where to look for commands:
# a fence (a shell block may open there) and a `$ ` (a prompt line may hold one). The set
# that reads the text for the patterns tells them too, without two more passes over it.
_MARKS = {"fence": r"```", "prompt": r"\$ "}
_PATTERN_NAMES = (*_RE2_PATTERNS, *_MARKS)
_compiled: dict[Any, Any] = {}  # by name and encoding: (what, name, latin1)
# A message is first matched against all the patterns at once (an RE2 set: one pass over
# its text, whichever patterns hit); only the patterns that hit are run to find their
# matches. Most messages name no URL, key, UUID or hash: 620 ms -> 150 ms over 10,000 corpus
# messages. The set only says which patterns match somewhere in the whole text; the URLs are
# blanked before the paths and ids are looked for, which can only remove matches, so a
# pattern the set rules out has nothing to find in the blanked text either.
_SET_MEMORY = 64 << 20


def _options(latin1: bool, max_mem: int | None = None) -> Any:
    import re2  # type: ignore[import-untyped]  # google-re2, a dependency; loaded on use

    options = re2.Options()
    options.log_errors = False
    if latin1:
        options.encoding = re2.Options.Encoding.LATIN1
    if max_mem is not None:
        options.max_mem = max_mem
    return options


# Each pattern is compiled twice: for UTF-8, and for Latin-1, which an ASCII text (nearly every
# message) is matched with: its automaton reads a byte a character, without the many states of
# the Unicode classes in UTF-8, and the paths take about a third less time. On ASCII text the
# two find the same: the patterns are ASCII, `\pL` and `\pN` hold no other ASCII character in
# either encoding, and `\b` is ASCII in RE2 (tested against the UTF-8 patterns).


def _scanner(name: str, latin1: bool = False) -> Any:
    key = ("pattern", name, latin1)
    found = _compiled.get(key)
    if found is None:
        import re2

        # Compiled for bytes: the text is encoded once for every pattern, not once a pattern.
        found = _compiled[key] = re2.compile(_RE2_PATTERNS[name].encode(), _options(latin1))
    return found


def _pattern_set(latin1: bool = False) -> tuple[Any, tuple[str, ...]]:
    """The RE2 set of every pattern and mark, and the name of each of its indexes."""
    key = ("set", "", latin1)
    found = _compiled.get(key)
    if found is None:
        import re2

        # A set has no fallback when its DFA runs out of memory (it would say "no match"):
        # it is given room far beyond what these patterns need on any text (tested on
        # hostile text in tests/compression/test_artifacts.py).
        patterns = re2.Set.SearchSet(_options(latin1, _SET_MEMORY))
        for pattern in (*_RE2_PATTERNS.values(), *_MARKS.values()):
            patterns.Add(pattern.encode())
        patterns.Compile()
        found = _compiled[key] = patterns
    return found, _PATTERN_NAMES


def _set_match(latin1: bool) -> tuple[Callable[[bytes], list[int] | None], tuple[str, ...]]:
    """`_pattern_set(latin1)`'s `Match` and the name of each index: the compiled set's own
    (google-re2's wraps it in a call that only checks the text's type), else the wrapper's.
    Looked up once per encoding."""
    key = ("set match", "", latin1)
    found = _compiled.get(key)
    if found is None:
        patterns, names = _pattern_set(latin1)
        inner = getattr(patterns, "_set", None)
        found = _compiled[key] = (getattr(inner, "Match", None) or patterns.Match, names)
    return found


def _finder(name: str, latin1: bool) -> Callable[[bytes], Iterator[tuple[int, int]]]:
    """The spans of the artifacts the pattern `name` finds in a text's bytes, left to right
    (the path of a path pattern, the whole match of the others); `latin1`: for an ASCII text.
    Found as they are taken: a message stops being scanned when it has given enough.

    Through the compiled RE2 object that google-re2's `finditer` wraps: one call and one
    tuple a match, where `finditer` builds a match object in Python (about 4 µs a match, and
    a long message names thousands of paths). Another binding gets `finditer`. Looked up
    once per pattern and encoding.
    """
    key = ("find", name, latin1)
    cached: Callable[[bytes], Iterator[tuple[int, int]]] | None = _compiled.get(key)
    if cached is not None:
        return cached
    pattern = _scanner(name, latin1)
    group = 1 if name in _PATH_BODIES else 0
    regexp = getattr(pattern, "_regexp", None)
    anchor = _unanchored()
    first = _PATH_FIRST.get(name) if latin1 else None
    if regexp is None or anchor is None:

        def spans(data: bytes) -> Iterator[tuple[int, int]]:
            for match in pattern.finditer(data):
                yield match.span(group)

    elif first is not None:
        body, tail = _PATH_BODIES[name]
        import re2

        ungrouped = rf"{_PATH_LEAD}(?:{body}){tail}".encode()
        bare = re2.compile(ungrouped, _options(latin1))._regexp.Match

        def spans(data: bytes) -> Iterator[tuple[int, int]]:
            at, end = 0, len(data)
            while at <= end:
                start, stop = bare(anchor, data, at, end)[0]
                if start < 0:
                    return
                yield (start if data[start] in first else start + 1), stop
                at = stop if stop > at else at + 1

    else:
        search = regexp.Match

        def spans(data: bytes) -> Iterator[tuple[int, int]]:
            at, end = 0, len(data)
            while at <= end:
                found = search(anchor, data, at, end)
                start, stop = found[0]
                if start < 0:
                    return
                yield found[group]
                at = stop if stop > at else at + 1  # (none of the patterns matches empty text)

    _compiled[key] = spans
    return spans


def _unanchored() -> Any:
    """google-re2's UNANCHORED for its compiled object's `Match`, looked up once; None for a
    binding without it."""
    if "anchor" not in _compiled:
        try:
            from re2 import _re2

            _compiled["anchor"] = _re2.RE2.Anchor.UNANCHORED
        except (ImportError, AttributeError):
            _compiled["anchor"] = None
    return _compiled["anchor"]


class _Read:
    """A message's text as the scan reads it: its UTF-8 bytes, and the patterns and marks
    that match somewhere in it (one pass of the RE2 set)."""

    __slots__ = ("ascii_only", "data", "hits", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8", "surrogatepass")
        # Spans are byte offsets; in an ASCII text they are the text's own offsets, and a
        # value is a slice of it (the URLs blanked below are never inside a path's or an id's
        # span).
        self.ascii_only = len(self.data) == len(text)
        match, names = _set_match(self.ascii_only)
        self.hits = {names[i] for i in match(self.data) or ()}


def _add_text_values(text: str, found: dict[tuple[str, str], None]) -> None:
    """Add the (kind, value) pairs of a message's text to `found` until it holds
    `ARTIFACTS_PER_MESSAGE`: URLs, then paths (not inside a URL), then ids (not inside a
    URL), each in the order they appear."""
    _add_values(_Read(text), found)


def _add_values(read: _Read, found: dict[tuple[str, str], None]) -> None:
    """`_add_text_values` of a text read already."""
    text, data, ascii_only, hits = read.text, read.data, read.ascii_only, read.hits
    rest = data  # the text with each URL blanked, for the paths and ids
    if "url" in hits:
        pieces, at = [], 0
        for start, end in _finder("url", ascii_only)(data):
            value = text[start:end] if ascii_only else _str(data[start:end])
            if _put(found, "url", value.rstrip(_TRAILING)):
                return
            pieces += [data[at:start], b" " * (end - start)]
            at = end
        rest = b"".join([*pieces, data[at:]])
    # `_put` written out in the two loops below, which take nearly every artifact (tens of
    # thousands over a 10,000-message history): a call per match was a tenth of the scan.
    # Neither adds an empty value, and `found` is below the cap on entry, so checking the
    # cap after each addition is checking it where `_put` does. In an ASCII text a path or an
    # id holds only letters, digits and `_.@+-/~`: one printable line with no space, which
    # `_one_line` leaves as it is unless it is longer than 200 characters.
    cap, add, limit = ARTIFACTS_PER_MESSAGE, found.setdefault, _VALUE_CHARS
    for name in ("absolute", "relative"):
        if name in hits:
            spans = _finder(name, ascii_only)(rest)
            if ascii_only:
                for start, end in spans:
                    value = text[start:end].rstrip(_TRAILING)
                    if len(value) > 3 and "/" in value:
                        add(("path", value if len(value) <= limit else _cut(value)), None)
                        if len(found) >= cap:
                            return
                continue
            for start, end in spans:
                value = _str(rest[start:end]).rstrip(_TRAILING)
                if len(value) > 3 and "/" in value:
                    add(("path", _one_line(value)), None)
                    if len(found) >= cap:
                        return
    for name in ("key", "code", "uuid", "hash"):
        if name in hits:
            for start, end in _finder(name, ascii_only)(rest):
                value = text[start:end] if ascii_only else _str(rest[start:end])
                if name == "hash" and (value.isdigit() or not any(c.isdigit() for c in value)):
                    continue
                # (every pattern matches one character or more, and at most 64)
                add(("id", value if ascii_only else _one_line(value)), None)
                if len(found) >= cap:
                    return


def _put(found: dict[tuple[str, str], None], kind: str, value: str) -> bool:
    """Add one artifact (cut to one line of at most 200 characters); whether `found` is
    full."""
    if value:
        value = _one_line(value)
        found.setdefault((kind, value), None)
    return len(found) >= ARTIFACTS_PER_MESSAGE


def _one_line(value: str) -> str:
    """`_cut(value)`, without the work for a value it leaves as it is."""
    # `_cut` leaves a value as it is when it is one printable line of at most 200
    # characters with no space at either end (nearly every one): `splitlines` splits
    # only at characters that are not printable, and the one printable character that
    # `str.strip` removes is the space.
    if len(value) > _VALUE_CHARS or not value.isprintable() or value[0] == " " or value[-1] == " ":
        return _cut(value)
    return value


def _str(value: bytes) -> str:
    return value.decode("utf-8", "surrogatepass")


def message_artifacts(msg: Msg) -> list[tuple[str, str]]:
    """The distinct (kind, value) artifacts of one message, at most `ARTIFACTS_PER_MESSAGE`:
    the commands of its tool calls, those of its shell blocks and `$ ` lines, then its URLs,
    paths and ids."""
    found: dict[tuple[str, str], None] = {}
    if _add_call_commands(msg, found):
        return list(found)
    read = _Read(message_text(msg))
    if not _add_text_commands(read.text, found, "fence" in read.hits, "prompt" in read.hits):
        _add_values(read, found)
    return list(found)


def message_commands(msg: Msg) -> list[str]:
    """The commands of one message: those `message_artifacts` lists first, without reading
    its text for the other kinds (what a summary's extract asks of an assistant message)."""
    found: dict[tuple[str, str], None] = {}
    if not _add_call_commands(msg, found):
        text = message_text(msg)
        _add_text_commands(text, found, "```" in text, "$ " in text)  # (the two _MARKS)
    return [value for _, value in found]


def _add_call_commands(msg: Msg, found: dict[tuple[str, str], None]) -> bool:
    """Add the commands of a message's tool calls; whether `found` is full."""
    if not isinstance(msg.content, str):
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                for command in _commands_of(block):
                    if _put(found, "command", command):
                        return True
    return False


def _add_text_commands(
    text: str, found: dict[tuple[str, str], None], fence: bool, prompt: bool
) -> bool:
    """Add the commands of a text's shell blocks and `$ ` lines, given whether it holds a
    fence and a `$ ` anywhere; whether `found` is full."""

    def add(kind: str, value: str) -> bool:
        return _put(found, kind, value)

    if fence:
        return _shell_commands(text, add)
    return prompt and _prompt_commands(text, add)


def _shell_commands(text: str, add: Callable[[str, str], bool]) -> bool:
    """Add the commands of a text's shell blocks and `$ ` lines; whether the cap was reached.

    A shell block is the lines between a fence naming a shell (```` ```bash ````, `sh`,
    `shell`, `console`, `zsh`) and the next fence; a fence is a line starting, after blanks,
    with ```` ``` ````. The lines of a shell block are read one by one (`_shell_block`);
    elsewhere only `$ ` lines count, found from each `$ ` (`_prompt_commands`).
    """
    fence: str | None = None  # the language of the open fence
    region = 0  # where the lines since the last fence line start
    at = text.find("```")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        opened = _FENCE.match(text[start:end])
        if opened is not None:
            if _region_commands(text[region:start], fence, add):
                return True
            fence = None if fence is not None else opened.group(1).lower()
            region = end + 1
        at = text.find("```", end)
    return _region_commands(text[region:], fence, add)


def _region_commands(lines: str, fence: str | None, add: Callable[[str, str], bool]) -> bool:
    """The commands of the lines between two fences, inside the fence `fence` (None: outside
    any); whether the cap was reached."""
    if fence in _SHELLS:
        return _shell_block(lines.split("\n"), add)
    return _prompt_commands(lines, add)


def _shell_block(lines: Iterable[str], add: Callable[[str, str], bool]) -> bool:
    """Add the commands of a shell block's lines: each line but a comment, the lines a
    backslash continues and the body of a here-document; whether the cap was reached."""
    heredoc: str | None = None  # the word that ends the here-document being read
    continued = False  # the previous line ended with a backslash
    for line in lines:
        stripped = line.strip()
        if heredoc is not None:
            heredoc = None if stripped == heredoc else heredoc  # a script's body, not commands
        elif stripped and not stripped.startswith("#"):
            if not continued and add("command", stripped.removeprefix("$ ")):
                return True
            continued = stripped.endswith("\\")
            started = _HEREDOC.search(stripped)
            heredoc = started.group(1) if started is not None else None
    return False


def _prompt_commands(text: str, add: Callable[[str, str], bool]) -> bool:
    """Add the commands of the `$ ` lines of a text outside a shell block; whether the cap was
    reached. Each line holding `$ ` is found from there, not every line read."""
    at = text.find("$ ")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        stripped = text[start:end].strip()
        if stripped.startswith("$ ") and len(stripped) > 2 and add("command", stripped[2:]):
            return True
        at = text.find("$ ", end)
    return False


def scan_messages(messages: Sequence[Msg]) -> list[list[tuple[str, str]]]:
    """`message_artifacts` of each message, in order: the costly part of `find_artifacts`,
    which a compaction runs in a worker thread while it persists and summarises (it waits
    there for the summary model, not for the CPU: RE2 holds the GIL while it matches)."""
    return [message_artifacts(msg) for msg in messages]


Scanned = Sequence[tuple[str, str]]
"""The artifacts of one message (`message_artifacts`)."""


class ArtifactCache:
    """The artifacts of each message a compressor has seen, found once per message.

    A compaction needs the artifacts of every message that leaves and of every message that
    stays: thousands of messages, about 40 µs each. An agent's loop counts its context
    before each model call, and the compressor scans the messages new to it then (one or two
    a step), so that a compaction looks the artifacts of its messages up instead of scanning
    them all at once; a history never seen before (a resumed session) is scanned when it is
    compacted. Keyed as `ContextTokenTracker` keys its counts, by `(msg.id,
    id(msg.content))`, with the content held so that its id is not reused; the entries of
    messages not in the context noted are dropped once the cache outgrows twice its size
    (after a compaction, at the next count).

    The artifacts are kept as tuples of strings, which the garbage collector stops tracking:
    ten thousand entries add no work to its full collections (each about 70 ms over a
    10,000-message history here).

    Not thread-safe: the compressor scans in a worker thread only what `missing` gave, and
    `add`s the results on its own thread.
    """

    def __init__(self) -> None:
        self._found: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}
        self._held: dict[tuple[str, int], object] = {}  # each entry's content, kept alive

    def __len__(self) -> int:
        return len(self._found)

    def missing(self, messages: Sequence[Msg]) -> list[Msg]:
        """The messages of `messages` not scanned yet."""
        found = self._found
        return [m for m in messages if (m.id, id(m.content)) not in found]

    def add(self, messages: Sequence[Msg], scanned: Sequence[Scanned]) -> None:
        """Keep `scanned` (`scan_messages(messages)`)."""
        for msg, artifacts in zip(messages, scanned, strict=True):
            key = (msg.id, id(msg.content))
            self._found[key] = tuple(artifacts)
            self._held[key] = msg.content

    def of(self, messages: Sequence[Msg]) -> list[Scanned]:
        """The artifacts of each message, scanning those not scanned yet."""
        missing = self.missing(messages)
        if missing:
            self.add(missing, scan_messages(missing))
        found = self._found
        return [found[(m.id, id(m.content))] for m in messages]

    def note(self, context: Sequence[Msg], new: Sequence[Msg]) -> None:
        """Scan `new`, the messages of `context` just counted for the first time (those
        counted before without a scan wait for the compaction that needs them); drop the
        entries of messages no longer in `context` once the cache outgrows twice its size."""
        missing = self.missing(new)
        if missing:
            self.add(missing, scan_messages(missing))
        if outgrown(self._found, len(context)):
            keys = ((m.id, id(m.content)) for m in context)
            self._found, self._held = kept_entries(self._found, self._held, keys)


def find_artifacts(
    messages: Sequence[Msg],
    lines: Mapping[str, int] | None = None,
    *,
    recency: int = 0,
    scanned: Sequence[Scanned] | None = None,
) -> tuple[list[FoundArtifact], Counter[str]]:
    """The artifacts of `messages` (oldest first), and a tally of the tool calls they made.

    Args:
        messages: the messages that leave the context.
        lines: the line of context.jsonl each message is on, by message id, when known.
        recency: added to each message's position, so that entries of a later compression
            sort as newer.
        scanned: `scan_messages(messages)`, when it was run already.
    """
    by_value: dict[tuple[str, str], FoundArtifact] = {}
    calls: Counter[str] = Counter()
    per_message = scanned if scanned is not None else scan_messages(messages)
    lines = lines or {}
    for position, (msg, artifacts) in enumerate(zip(messages, per_message, strict=True)):
        line = lines.get(msg.id)
        if not isinstance(msg.content, str):
            for block in msg.content:
                if isinstance(block, ToolCallBlock):
                    calls[block.name] += 1
        for pair in artifacts:
            known = by_value.get(pair)
            if known is None:
                by_value[pair] = FoundArtifact(pair[0], pair[1], line, 1, recency + position)
            else:
                known.mentions += 1
                known.recency = recency + position
                if line is not None:
                    known.line = line
    return list(by_value.values()), calls


def named_values(
    messages: Iterable[Msg], scanned: Iterable[Scanned] | None = None
) -> set[tuple[str, str]]:
    """The artifacts the messages still in the context name (`scanned`: their
    `scan_messages`, when it was run already)."""
    named: set[tuple[str, str]] = set()
    for artifacts in scanned if scanned is not None else map(message_artifacts, messages):
        named.update(artifacts)
    return named
