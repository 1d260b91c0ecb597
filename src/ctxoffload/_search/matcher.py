"""The compiled pattern of the one search engine (`engine.py`): a pattern, a fixed string or
either ignoring case, compiled to find the lines of bytes that match.

This is where every door compiles a user's pattern (`compile_matcher`): the agent's Grep, the
retrieval tool, `ctxoffload grep` and through it the viewer. RE2 runs it when it understands
the pattern: linear time in the input, so a pattern a model or a person writes cannot hang
the search (`regex` says why). Where a door allows it (`ctxoffload grep`), a pattern RE2
refuses (a backreference, a lookaround) runs in Python's `re` instead, under a `Deadline`
that interrupts it; the agent's tools refuse it with the advice of `regex.invalid_pattern`.
A matcher judges lines of bytes (`matches_line`) and of decoded text (`matches_text`, `span`:
where a door points at the match).

A matcher also names bytes every matching line holds (`required_literal`), which a search
looks for first, at the byte that is rarest in the file (`literal_finder`).

(Plain classes here, not dataclasses: importing `dataclasses` costs ~12 ms, a tenth of a
whole `ctxoffload grep` of 100 MB. Nor `re` where RE2 runs the pattern: with `enum` it costs
~6 ms of a `ctxoffload grep` that RE2 and ripgrep answer in 30.)
"""

from __future__ import annotations

from collections.abc import Callable

from ..exceptions import InvalidContent
from .regex import invalid_pattern, load_re2, re2_options, reads_whole_text, refuse_empty

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Deadline",
    "Matcher",
    "as_searched",
    "compile_matcher",
    "every_line",
    "literal_finder",
    "plain_finder",
    "required_literal",
]


class Matcher:
    """A compiled pattern: the one place that knows which regex engine runs.

    (Plain classes here, not dataclasses: importing `dataclasses` costs ~12 ms, a tenth of
    a whole search of 100 MB.)
    """

    __slots__ = (
        "_compiled",
        "_judge",
        "_text_literal",
        "engine",
        "is_literal",
        "literal",
        "pattern",
        "search",
    )

    def __init__(
        self,
        pattern: str,
        compiled: Any,
        engine: str,
        literal: bytes | None = None,
        *,
        whole_text: bool = False,
        is_literal: bool = False,
    ) -> None:
        self.pattern = pattern  # as the user gave it
        self._compiled = compiled  # RE2's or `re`'s, for bytes

        def search(buffer: Any, pos: int) -> int | None:
            found = compiled.search(buffer, pos)
            return None if found is None else int(found.start())

        self._judge = search
        # Whether the pattern is `literal` and nothing else, judged by `bytes.find`.
        self.is_literal = is_literal and literal is not None
        # The literal as text, for `matches_text` (see there), when the pattern is it alone.
        self._text_literal = literal.decode("ascii") if is_literal and literal else None
        if self.is_literal:
            # The pattern is `literal` and nothing else (ASCII: a byte that is not UTF-8,
            # which the engine may read as a character, is never one of it): each line is
            # judged by `bytes.find`, a tenth of the cost of a call through RE2's wrapper.
            def find(buffer: Any, pos: int) -> int | None:
                found = buffer.find(literal, pos)
                return None if found < 0 else int(found)

            self._judge = find
        # (buffer, pos) -> where the next line that may match starts, or None. A pattern
        # that reads the whole text's ends (`reads_whole_text`: `\A`, `\z`, `(?-m)`) finds
        # in a buffer only what is at its ends: every line is then a candidate.
        self.search = every_line if whole_text else search
        self.engine = engine  # "re2" or "re"
        # Bytes that every matching line contains (see `required_literal`), or None.
        self.literal = literal

    def matches_line(self, line: bytes) -> bool:
        """Whether one line (without its newline) matches."""
        return self._judge(line, 0) is not None

    def matches_text(self, text: str) -> bool:
        """Whether one line of decoded text matches (`as_searched`)."""
        if self._text_literal is not None:
            # An ASCII literal is in a text's UTF-8 exactly where it is in the text (every
            # other character, U+FFFD for a lone surrogate too, is written with bytes over
            # 0x7f): found in the text without encoding it, a third of the calls.
            return self._text_literal in text
        return self._judge(as_searched(text), 0) is not None

    def span(self, text: str) -> tuple[int, int] | None:
        """Where in one line of decoded text the first match is, in characters, for a door
        that points at it (or cuts a long line around it); None when it does not match."""
        data = as_searched(text)
        found = self._compiled.search(data)
        if found is None:
            return None
        start, end = (int(i) for i in found.span())
        return len(data[:start].decode("utf-8", "replace")), len(
            data[:end].decode("utf-8", "replace")
        )


def as_searched(text: str) -> bytes:
    """A line of decoded text as the bytes a pattern is matched on: its UTF-8, each lone
    surrogate (a JSON escape such as `\\ud800`, which UTF-8 cannot spell) as the U+FFFD
    shown for it, one character for one, so a span in the bytes is a span in the text."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        import re

        return re.sub("[\ud800-\udfff]", "\ufffd", text).encode("utf-8")


# What `re.escape` puts a backslash before (Python 3.7 and later): a fixed string is escaped
# without importing `re` when RE2 runs it (tests/search check it against `re.escape`).
_ESCAPED = {i: "\\" + chr(i) for i in b"()[]{}?*+-|^$\\.&~# \t\n\r\v\f"}


def _escape(text: str) -> str:
    """`re.escape(text)`: `text` as a pattern that matches it literally."""
    return text.translate(_ESCAPED)


def every_line(buffer: Any, pos: int) -> int | None:
    """Every line is a candidate: the next one starts at `pos` (and is judged alone)."""
    return pos


def compile_matcher(
    pattern: str,
    *,
    ignore_case: bool = False,
    fixed: bool = False,
    backtracking: bool = False,
    escaped_bytes: bool = False,
) -> Matcher:
    """Compile a user's pattern, the one place every door does it: RE2 when it can. Every
    refusal (not a string, empty, a lone surrogate, a pattern the engine refuses) is the
    same `InvalidContent` from every door, saying what to write instead.

    Args:
        pattern: a regular expression (RE2 syntax), or the string itself with `fixed`.
        ignore_case: match letters of either case.
        fixed: `pattern` is a string to find, not a regular expression.
        backtracking: run a pattern RE2 refuses in Python's `re` (give the search a
            `Deadline`); otherwise it is refused.
        escaped_bytes: `pattern` came from a command line, where Python spells each byte
            that is not UTF-8 as a lone surrogate (surrogateescape): search for those bytes.
            Otherwise a lone surrogate, which no text holds, is refused.

    Raises:
        InvalidContent: the pattern cannot be searched for; the message says what to
            write instead.
    """
    if not isinstance(pattern, str):
        raise InvalidContent(f"pattern {pattern!r} is not a string: pass a regular expression")
    refuse_empty(pattern)
    try:
        pattern.encode("utf-8", "surrogateescape" if escaped_bytes else "strict")
    except UnicodeEncodeError as exc:
        raise invalid_pattern(
            pattern,
            f"it holds a lone surrogate ({exc.object[exc.start]!r}), which no regular "
            "expression can search for",
            backtracking=backtracking,
            hint="leave it out",
        ) from None
    source = _escape(pattern) if fixed else pattern
    whole_text = reads_whole_text(source)
    literal = None
    if not ignore_case:
        literal = pattern if fixed else required_literal(pattern)
    needle = None if not literal else literal.encode("utf-8", "surrogateescape")
    if needle is not None and b"\n" in needle:
        needle = None  # a line never holds a newline: nothing would match anyway
    # The whole pattern is one ASCII string: with -F, or letters, digits, `_` and spaces.
    is_literal = (
        needle is not None
        and pattern.isascii()
        and needle == pattern.encode()
        and (fixed or pattern.replace("_", "a").replace(" ", "a").isalnum())
    )
    encoded = source.encode("utf-8", "surrogateescape")
    try:
        re2 = load_re2()
    except ImportError:
        re2 = None
    if re2 is not None:
        options = re2_options()
        options.case_sensitive = not ignore_case
        options.encoding = re2.Options.Encoding.UTF8
        try:
            # (?m): ^ and $ at line ends, as grep means them, while searching a whole buffer.
            compiled = re2.compile(b"(?m)" + encoded, options=options)
        except (re2.error, TypeError, ValueError, OverflowError) as exc:
            if not backtracking:
                raise invalid_pattern(
                    pattern, exc.args[0] if exc.args else exc, backtracking=False
                ) from None
            # backreferences, lookarounds: Python's re below, under the deadline
        else:
            return Matcher(
                pattern, compiled, "re2", needle, whole_text=whole_text, is_literal=is_literal
            )
    import re

    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        compiled = re.compile(encoded, flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise invalid_pattern(pattern, exc, backtracking=True) from exc
    return Matcher(pattern, compiled, "re", needle, whole_text=whole_text, is_literal=is_literal)


_METACHARACTERS = frozenset("\\.[]{}()*+?|^$")
_QUANTIFIERS = frozenset("*+?{")


# Escapes of a letter that stand alone, in RE2 and in Python: a class, an anchor, a control
# character. Any other letter or digit after a backslash may take more characters with it.
_ONE_CHARACTER_ESCAPES = frozenset("dDwWsSbBAzZntrfv")


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters that every match of `pattern` contains, or None.

    Read conservatively, so that the answer holds in RE2's syntax and in Python's: only
    characters outside any group or class count, an escaped punctuation mark counts as
    itself, so does an ASCII character spelled `\\xHH` (`escape` spells a space `\\x20`), a
    character followed by a quantifier does not count, and a pattern with inline flags
    (`(?i)`, `(?x)`...), RE2's `\\Q...\\E`, a top-level `|`, a nested class, a brace that is
    not a repetition or another escape that spells a character (`\\xe9`, `\\x{41}`, `\\101`,
    `\\pL`) has none. A wrong None only costs speed; a wrong literal would lose matches,
    hence the caution.
    """
    if "(?" in pattern or "\\Q" in pattern:
        return None  # inline flags, or RE2's quoting, change what the characters mean
    best = ""
    run: list[str] = []
    depth = 0
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        literal: str | None = None
        step = 1
        if ch == "\\":
            step = 2
            escaped = pattern[i + 1 : i + 2]
            if escaped.isascii() and escaped.isprintable() and not escaped.isalnum():
                literal = escaped  # \. \- \  ...: the character itself
            elif escaped.isdigit():
                # A backreference (\1, \12) or an octal character (\101): at most three
                # digits belong to it; skipping more than an engine reads only shortens the
                # runs, which is safe.
                while step < 4 and pattern[i + step : i + step + 1].isdigit():
                    step += 1
            elif escaped == "x" and _is_ascii_hex(pattern[i + 2 : i + 4]):
                # \x20, as `escape` spells a space: one ASCII character in both engines (a
                # higher one is a character to RE2 but a byte to Python's re on bytes).
                literal = chr(int(pattern[i + 2 : i + 4], 16))
                step = 4
            elif escaped not in _ONE_CHARACTER_ESCAPES:
                # \xe9, \x{41}, \pL, \p{Greek}, \N{...}, \u0041: the characters after the
                # letter belong to the escape, which spells a character of its own.
                return None
        elif ch == "[":
            j = i + 1
            j += pattern.startswith("^", j)
            j += pattern.startswith("]", j)
            while j < n and pattern[j] != "]":
                if pattern[j] == "[":
                    return None  # [[:alpha:]] and friends: read differently by the engines
                j += 2 if pattern[j] == "\\" else 1
            step = j + 1 - i
        elif ch == "{":
            close = pattern.find("}", i)
            if close < 0 or pattern[i + 1 : close].strip("0123456789,"):
                return None  # a brace that is not a repetition: the engines disagree
            step = close + 1 - i
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return None
        elif ch not in _METACHARACTERS and ch.isprintable():
            literal = ch
        if ch in _QUANTIFIERS and run:
            run.pop()  # the character before a quantifier may be absent or repeated
        if literal is not None and depth == 0:
            run.append(literal)
        else:
            if len(run) > len(best):
                best = "".join(run)
            run = []
        i += step
    if len(run) > len(best):
        best = "".join(run)
    return best or None


def _is_ascii_hex(digits: str) -> bool:
    """Whether two characters are the hex digits of an ASCII character (`20`, `7e`)."""
    return len(digits) == 2 and digits[0] in "01234567" and digits[1] in "0123456789abcdefABCDEF"


def literal_finder(
    needle: bytes, sample: bytes | bytearray
) -> Callable[[bytes | bytearray, int, int], int | None]:
    """A fast search for `needle`, started at its rarest byte in `sample`: where the next
    `needle` starts, or None.

    RE2 skips to a literal's first byte with `memchr`, so starting the needle at the byte
    that is rarest in this file (measured on its first piece) makes the stops few and the
    scan fast; at each stop the whole needle is compared, so that a line is judged with the
    whole pattern only where the needle is.
    """
    # Each distinct byte counted once: a long -F string costs at most 256 counts.
    counts = {byte: sample.count(bytes((byte,))) for byte in set(needle)}
    offset = needle.index(min(needle, key=counts.__getitem__))
    rest = needle[offset:]
    try:
        re2 = load_re2()
    except ImportError:

        def find_rest(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
            found = buffer.find(rest, pos, end)
            return None if found < 0 else found

    else:
        options = re2.Options()
        options.log_errors = False
        options.encoding = re2.Options.Encoding.LATIN1  # bytes as bytes
        compiled = re2.compile(_escape(rest.decode("latin-1")).encode("latin-1"), options=options)

        def find_rest(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
            found = compiled.search(buffer, pos, end)
            return None if found is None else int(found.start())

    def find(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
        while True:
            found = find_rest(buffer, pos + offset, end)
            if found is None:
                return None
            if buffer.startswith(needle, found - offset, end):
                return found - offset
            pos = found - offset + 1

    return find


def plain_finder(needle: bytes) -> Callable[[bytes | bytearray, int, int], int | None]:
    """`literal_finder` for a small text: where the next `needle` starts (`bytes.find`), or
    None, with nothing counted or compiled first."""

    def find(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
        found = buffer.find(needle, pos, end)
        return None if found < 0 else found

    return find


class Deadline:
    """Interrupts a `re` search after `seconds` (Python's regex engine checks for signals).

    RE2 needs none (it runs in linear time); a search by Python's `re` of a pattern that
    backtracks runs inside one C call, which only a signal stops. Effective in the main
    thread of a system with `setitimer`; elsewhere a no-op.
    """

    class Expired(Exception):
        """The deadline passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.active = False
        if seconds > 0:  # only Python's re needs one: signal and threading load only then
            import signal
            import threading

            self.active = (
                hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread()
            )
        self._previous: Any = None

    def __enter__(self) -> Deadline:
        if self.active:
            import signal

            def expire(signum: int, frame: Any) -> None:
                raise Deadline.Expired()

            self._previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
