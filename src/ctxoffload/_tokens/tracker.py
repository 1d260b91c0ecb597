"""Counting a whole context before each model call: each message counted once and cached
(`ContextTokenTracker`), anchored on what the provider reported, and past a limit estimated
within bounds (`TokenCount`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .costs import (
    DEFAULT_DATA_BLOCK_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TokenCounter,
    dumps_json,
    message_tokens,
)
from .counters import TiktokenCounter
from .families import CalibratedCounter

if TYPE_CHECKING:
    from ..messages import Msg

__all__ = ["ContextTokenTracker", "TokenCount", "kept_entries", "outgrown"]


@dataclass(frozen=True)
class TokenCount:
    """What a context costs, counted exactly or, past a limit, estimated within bounds.

    `ContextTokenTracker.count_past` counts the newest messages first and stops once the
    count is over its limit: the decision it was asked for ("over the trigger?") is then
    exact, and the messages it did not count are estimated, never tokenized.

    Attributes:
        tokens: the exact count when `exact`, else the estimate.
        exact: whether every message was counted.
        at_least: a bound no exact count can fall below: the tokens counted, and the
            overhead of each message not counted (`tokens` when exact).
        at_most: a bound no exact count can exceed: the messages not counted are costed at
            one token per UTF-8 byte, as a byte-level BPE never takes more (times the
            ratio of a `CalibratedCounter`) (`tokens` when
            exact).
        uncounted: how many of the oldest messages were estimated.
    """

    tokens: int
    exact: bool = True
    at_least: int = 0
    at_most: int = 0
    uncounted: int = 0

    @classmethod
    def of(cls, tokens: int) -> TokenCount:
        """An exact count."""
        return cls(tokens, True, tokens, tokens, 0)

    @property
    def bounds(self) -> tuple[int, int] | None:
        """`(at_least, at_most)` for an estimate; None for an exact count."""
        return None if self.exact else (self.at_least, self.at_most)

    def fields(self) -> dict[str, Any]:
        """The event fields beside `tokens_before` for an estimate; none for an exact count
        (`ctxoffload show` words them: `workspace.token_change`)."""
        if self.exact:
            return {}
        return {
            "tokens_before_exact": False,
            "tokens_before_range": [self.at_least, self.at_most],
            "tokens_before_uncounted": self.uncounted,
        }


def _tokens_per_byte(counter: TokenCounter) -> float | None:
    """The most tokens a UTF-8 byte can cost under `counter`: 1 for a byte-level BPE (an
    encoding's count, or any counter that is exact), the ratio times that for a
    `CalibratedCounter` over one; None when no bound is known (the heuristic)."""
    if isinstance(counter, CalibratedCounter):
        base = _tokens_per_byte(counter.base)
        return None if base is None else base * counter.ratio
    if isinstance(counter, TiktokenCounter) or counter.is_exact:
        return 1.0
    return None


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _bound(msgs: Sequence[Msg], data_block_tokens: int) -> int:
    """What `msgs` cost with every string at a token a UTF-8 byte, which no byte-level BPE
    count exceeds (each token is one byte or more)."""
    return sum(message_tokens(m, _utf8_length, _utf8_length, data_block_tokens) for m in msgs)


@dataclass
class _Anchor:
    input_tokens: int
    keys: list[tuple[str, int]]
    contents: list[object]  # strong references, as the tracker holds each counted content
    tools_tokens: int | None


def _key(msg: Msg) -> tuple[str, int]:
    return (msg.id, id(msg.content))


class ContextTokenTracker:
    """Counts a whole context incrementally, for the check before each model call.

    Each message's count is cached under `(msg.id, id(msg.content))`, so after one message
    is appended to a long context, a new `count` tokenizes only that message and does a
    dictionary lookup for every other one. Entries not seen in the latest `count` are
    evicted once the cache outgrows twice the context.

    Messages are treated as immutable: code that changes a message's content must make a
    new `Msg` (`msg.model_copy(update={"content": ...})`), as ctxoffload itself does.
    Mutating `msg.content` in place leaves a stale count.

    The count can be anchored on what the provider reported: after a model call, pass its
    `usage.input_tokens` and the messages that were sent to `anchor`. Later counts are then
    that number plus the counts of messages appended since (and the change in the tool
    schemas' cost). If the anchored messages are no longer an unchanged prefix of the
    context (after compression, say), the anchor is dropped.

    Not thread-safe: use one tracker per agent loop.

    Args:
        counter: the token counter to count new messages with.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        # Per message key: its tokens, and its content (held, so that id(content) is not
        # reused by another object while the count is kept, which is what makes (msg.id,
        # id(content)) a sound key). Two dicts rather than an object per message: ints and
        # keys give the garbage collector nothing to walk.
        self._tokens: dict[tuple[str, int], int] = {}
        self._held: dict[tuple[str, int], object] = {}
        self._anchor: _Anchor | None = None
        self._new: list[Msg] = []
        self._tools_json: str | None = None
        # A deep copy of the tools last serialised: the same schemas again (the common call)
        # are known by comparing with it, which costs a twentieth of serialising them.
        self._tools_seen: list[Any] | None = None
        self._tools_tokens = 0
        self._last_tools_tokens: int | None = None

    @property
    def tools_tokens(self) -> int:
        """What the tool schemas of the latest `count` cost (0 before any count)."""
        return self._last_tools_tokens or 0

    @property
    def is_anchored(self) -> bool:
        """Whether counts currently start from a provider-reported number."""
        return self._anchor is not None

    def count_message(self, msg: Msg) -> int:
        """Tokens one message costs, from the cache when it was counted before."""
        return self._message_tokens(msg, _key(msg))

    def known(self, msg: Msg) -> int | None:
        """The tokens of `msg` when it was counted before, else None (nothing is counted)."""
        return self._tokens.get(_key(msg))

    @property
    def newly_counted(self) -> list[Msg]:
        """The messages the latest `count` or `count_past` tokenized: those it had not
        counted before (what someone keeping per-message work beside the counts needs to do
        for, without a second pass over the context)."""
        return self._new

    def _message_tokens(self, msg: Msg, key: tuple[str, int]) -> int:
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = self._tokens[key] = self.counter.count_message(msg)
            self._held[key] = msg.content
            self._new.append(msg)
        return tokens

    def count(
        self,
        system: Msg | None,
        summary: Msg | None,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
    ) -> int:
        """Tokens the next model call will send.

        Args:
            system: the system prompt, if any.
            summary: the summary of compressed history, if any.
            messages: the conversation, oldest first.
            tools: the tool JSON schemas sent with the call.

        Returns:
            system + summary + messages (overheads and reply priming included) + tools; or,
            when anchored, the anchored input tokens + what was appended since.
        """
        self._new = []
        context = list(_context(system, summary, messages))
        keys = [(m.id, id(m.content)) for m in context]
        known = self._tokens
        # A lookup a message, and a count only for one not seen before (this runs before
        # every model call, over the whole context).
        per_message = [
            tokens if (tokens := known.get(k)) is not None else self._message_tokens(m, k)
            for m, k in zip(context, keys, strict=True)
        ]
        tools_tokens = self._count_tools(tools)
        self._last_tools_tokens = tools_tokens
        self._evict(keys)

        anchor = self._anchor
        if anchor is not None:
            if keys[: len(anchor.keys)] == anchor.keys:
                added = sum(per_message[len(anchor.keys) :])
                tools_change = (
                    tools_tokens - anchor.tools_tokens if anchor.tools_tokens is not None else 0
                )
                return max(0, anchor.input_tokens + added + tools_change)
            self._anchor = None
        priming = REPLY_PRIMING_TOKENS if context else 0
        return sum(per_message) + priming + tools_tokens

    def count_past(
        self,
        system: Msg | None,
        summary: Msg | None,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        *,
        limit: float,
    ) -> TokenCount:
        """Tokens the next model call will send, counted exactly up to where they pass `limit`.

        The system prompt, the summary and the tool schemas are counted, then the messages
        from the newest back; once the count is over `limit`, the older messages are not
        tokenized: those counted before add their known count, the others an estimate
        (their UTF-8 bytes at the tokens a byte the counted messages cost), with its bounds
        (`TokenCount`). Whether the context is over `limit` is
        exact either way, and so is every message that stays when the newest part is kept:
        a compaction counts only what decides it. An anchored count (`anchor`) is exact and
        costs only the messages appended since.

        Args:
            system: the system prompt, if any.
            summary: the summary of compressed history, if any.
            messages: the conversation, oldest first.
            tools: the tool JSON schemas sent with the call.
            limit: the count past which older messages are estimated (the trigger).
        """
        self._new = []
        context = list(_context(system, summary, messages))
        keys = [_key(m) for m in context]
        anchor = self._anchor
        if anchor is not None and keys[: len(anchor.keys)] != anchor.keys:
            self._anchor = anchor = None
        if anchor is not None or _tokens_per_byte(self.counter) is None:
            # Anchored: the messages appended since are all there is to count. A count with
            # no known bound a byte (the heuristic's costs a length a string) is made whole.
            return TokenCount.of(self.count(system, summary, messages, tools))
        heads = len(context) - len(messages)  # the system prompt and the summary
        total, stop = self._count_newest(context, keys, heads, tools, limit)
        # The older messages counted before (an agent's loop counts each once) cost a lookup;
        # only those never counted are estimated.
        unknown: list[Msg] = []
        known = self._tokens
        for i in range(heads, stop):
            tokens = known.get(keys[i])
            if tokens is None:
                unknown.append(context[i])
            else:
                total += tokens
        self._evict(keys)
        if not unknown:
            return TokenCount.of(total)
        return self._estimate(total, unknown, context[stop:], sum(known[k] for k in keys[stop:]))

    def _count_newest(
        self,
        context: list[Msg],
        keys: list[tuple[str, int]],
        heads: int,
        tools: Sequence[dict[str, Any]],
        limit: float,
    ) -> tuple[int, int]:
        """The first part of `count_past`: the tool schemas, the reply priming, the `heads`
        (the system prompt and the summary), then the messages from the newest back until
        the total is over `limit`. Returns the total and the index of the oldest message
        counted (`heads` when none was over)."""
        total = self._count_tools(tools) + (REPLY_PRIMING_TOKENS if context else 0)
        self._last_tools_tokens = total - (REPLY_PRIMING_TOKENS if context else 0)
        for i in range(heads):
            total += self._message_tokens(context[i], keys[i])
        stop = heads
        for i in range(len(context) - 1, heads - 1, -1):
            total += self._message_tokens(context[i], keys[i])
            if total > limit:
                stop = i
                break
        return total, stop

    def _estimate(
        self, total: int, unknown: list[Msg], counted: Sequence[Msg], counted_tokens: int
    ) -> TokenCount:
        """`total` (what was counted or known) with an estimate of the `unknown` messages,
        taken from the tokens a byte the `counted` ones (the newest, `counted_tokens` in
        all) cost, and its bounds."""
        data = getattr(self.counter, "data_block_tokens", DEFAULT_DATA_BLOCK_TOKENS)
        bound = _bound(unknown, data)
        most = _tokens_per_byte(self.counter) or 1.0
        # The estimate takes the tokens a byte of the messages counted (the newest) cost
        # against the same bound, to the bound of those not counted.
        seen_bound = _bound(counted, data)
        ratio = counted_tokens / seen_bound if seen_bound else 0.25
        # Each message costs its overhead at least, and no more than its bound.
        low = total + MESSAGE_OVERHEAD_TOKENS * len(unknown)
        high = total + math.ceil(bound * most)
        estimate = min(max(total + round(bound * ratio), low), high)
        return TokenCount(estimate, False, low, high, len(unknown))

    def anchor(self, input_tokens: int, messages: Sequence[Msg]) -> bool:
        """Record the provider-reported input tokens for exactly `messages`.

        A report below a quarter of this tracker's own count of the same request is not
        the whole prompt (Anthropic's `usage.input_tokens` leaves out the tokens read from
        or written to its prompt cache: add `cache_read_input_tokens` and
        `cache_creation_input_tokens`); it is not used, and any previous anchor is dropped,
        so a partial figure never lowers the count the trigger compares.

        Args:
            input_tokens: the input tokens the provider reported for the whole request; 0
                or less means "not reported" and just drops any previous anchor.
            messages: every message that call sent, in order, the system prompt and the
                summary included (what `ChatModel.generate` received). The tool schemas are
                assumed to be the ones of the latest `count`.

        Returns:
            Whether the report was taken as the anchor.
        """
        ours = self._known_request(messages)
        if input_tokens <= 0 or (ours is not None and input_tokens * 4 < ours):
            self._anchor = None
            return False
        self._anchor = _Anchor(
            input_tokens=input_tokens,
            keys=[_key(m) for m in messages],
            contents=[m.content for m in messages],
            tools_tokens=self._last_tools_tokens,
        )
        return True

    def _known_request(self, messages: Sequence[Msg]) -> int | None:
        """This tracker's count of a request of `messages` (and the latest tool schemas), or
        None when one of them was never counted."""
        counts = [self._tokens.get(_key(m)) for m in messages]
        if not counts or any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None) + REPLY_PRIMING_TOKENS + self.tools_tokens

    def _count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        # The schemas rarely change between calls: equal to the copy kept, they are the same
        # (a schema changed in place is unequal to the copy); else their JSON decides, and
        # is tokenized only when it changed.
        given = list(tools)
        if self._tools_seen is not None and _same_values(given, self._tools_seen):
            return self._tools_tokens
        tools_json = dumps_json(given) if given else ""
        if tools_json != self._tools_json:
            self._tools_json = tools_json
            self._tools_tokens = self.counter.count_tools(given) if given else 0
        self._tools_seen = _copy_of(given)
        return self._tools_tokens

    def _evict(self, keys: list[tuple[str, int]]) -> None:
        """Drop the counts of messages not in the context of `keys` once there are more than
        twice as many as it holds (`outgrown`)."""
        if outgrown(self._tokens, len(keys)):
            self._tokens, self._held = kept_entries(self._tokens, self._held, keys)


def _copy_of(values: list[Any]) -> list[Any] | None:
    """A deep copy of tool schemas to compare later ones with; None when they cannot be
    copied (an object a host put in a schema), and are then serialised at every count."""
    try:
        return copy.deepcopy(values)
    except Exception:  # deepcopy runs a value's own __deepcopy__ / __reduce__
        return None


def _same_values(given: list[Any], seen: list[Any]) -> bool:
    """Whether schemas equal the copy taken of earlier ones. `==` holds 1, 1.0 and True
    equal, which JSON writes apart: a schema whose value turned from one to another in place
    keeps its count, off by a token, until the schemas next change."""
    try:
        return bool(given == seen)
    except Exception:  # a value's own __eq__ failing: serialise, as before
        return False


_V = TypeVar("_V")
_Key = tuple[str, int]


def outgrown(entries: Mapping[_Key, object], context: int) -> bool:
    """Whether a per-message cache keyed by `(msg.id, id(msg.content))` (the tracker's counts,
    the artifact cache) holds more than twice a context of `context` messages, and so drops
    the entries of messages no longer in it."""
    return len(entries) > 2 * context + 64


def kept_entries(
    values: dict[_Key, _V], held: dict[_Key, object], keys: Iterable[_Key]
) -> tuple[dict[_Key, _V], dict[_Key, object]]:
    """The entries of `values` and `held` (each value's content, kept alive) under `keys`
    alone: built anew rather than the others deleted, since after a compaction the context
    is a few messages and the cache thousands."""
    kept = [k for k in keys if k in values]
    return {k: values[k] for k in kept}, {k: held[k] for k in kept}


def _context(system: Msg | None, summary: Msg | None, messages: Sequence[Msg]) -> Iterator[Msg]:
    if system is not None:
        yield system
    if summary is not None:
        yield summary
    yield from messages
