"""The artifact index: the artifacts of what left (`_artifacts`) that the next context names
nowhere, each with the line of context.jsonl that holds it, within a budget of tokens.

`ArtifactIndex.build` checks each artifact that left against the new context (the summary's
text and the messages kept) and lists the ones named nowhere, in `_order`'s order, within
its budget counted exactly. What the budget cuts is counted, and the whole list is written
to events.jsonl (an `artifacts` event), which the index names. How its rows are laid out,
each entry whole on its line's row or folded into the tree of its directories or the row of
its command, is `_layout`'s; how it searches for the layout that names the most,
`_search`'s and, folded, `_folding`'s.

The index is built while the agent waits, and a compaction may drop a hundred listings of a
thousand files at once. So its time is linear in what left:

- every test of whether a value is written somewhere (in the summary's text, inside another
  entry, in the rows) is asked of a `Substrings`, which reads only the lines that may hold
  it, not the whole text once per value;
- once its budget refuses an entry, the estimate weighs a few thousand more (cheaper ones
  may still fit, `_weighed_past`), not every one that left: the rest is cut without being
  counted, and named when the index's text holds it all the same;
- the searches for the most the budget holds render and count indexes of about the size
  that fits, starting from an estimate and growing or shrinking from there, never one of
  everything that left;
- each index rendered and counted while searching is a step of an `IndexClock`, which a
  compaction gives what is left of its `summary_timeout`. Out of time, the index keeps the
  best it found that fits: at the least, the entries whole on their line's row, taken by an
  estimate and then fitted counted exactly (the layout before groups, one pass over what
  left); the compression event's `artifacts` report says `out_of_time`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..._disk.layout import CONTEXT_FILE, EVENTS_FILE
from ..._tokens.counters import count_by_lines, count_known
from ...messages import Msg
from ...text import tagged
from ...tokens import TokenCounter
from ._artifacts import NEWLINE_MARK, FoundArtifact, Scanned, named_values
from ._folding import most_folded, take_folded
from ._layout import IndexRows, Layouts, group_pieces, render_rows
from ._order import Folds, Key, in_order, key_of
from ._search import IndexClock, most_within, slack
from ._substrings import Substrings

__all__ = ["HEADER", "ArtifactIndex", "events_file"]

HEADER = (
    "Paths, URLs, commands and IDs from messages that left, not mentioned above, by the line "
    f"of {CONTEXT_FILE} holding their message. Values are space-separated; one with a space "
    "follows ` | `."
)
"""The index's first line: what its rows are and how to read one back (rules for the rows
that fold, `COMMAND_RULE` and `TREE_RULE`, follow it when the index holds such a row)."""


def _weighed_past(taken: int) -> int:
    """How many more entries the estimate weighs once the budget refused one, when `taken`
    fitted before it: cheaper ones later in the order may still fit, but a budget that took
    `taken` holds about as many again at most, not a hundred thousand."""
    return max(4_096, 4 * taken)


@dataclass
class ArtifactIndex:
    """What a compaction did with the artifacts that left, and the index that names them.

    Attributes:
        entries: the artifacts listed in the index, in its order.
        in_summary: artifacts the summary's own text names, or the text of an entry.
        in_kept: artifacts a message still in the context names.
        cut: artifacts the budget left out (listed in events.jsonl).
        calls: the tool calls that left, by name.
        carried: the entries the next compaction checks again (what this context names
            only through the summary or the index, which the next compaction replaces).
        cut_before: artifacts cut by earlier compactions, for the index's last line.
        show_calls: whether the tally of calls fitted the budget.
        folded: the entries (`(kind, value)`) written in the row of their directory or of
            their command's program and file (`_layout`) rather than whole.
        budget: the tokens the index could take.
        out_of_time: whether its `IndexClock` ran out before the search for the layout
            that names the most was done (the index is the best found by then).
    """

    entries: list[FoundArtifact] = field(default_factory=list)
    in_summary: list[FoundArtifact] = field(default_factory=list)
    in_kept: list[FoundArtifact] = field(default_factory=list)
    cut: list[FoundArtifact] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    carried: list[FoundArtifact] = field(default_factory=list)
    cut_before: int = 0
    show_calls: bool = False
    folded: set[Key] = field(default_factory=set)
    budget: int = 0
    out_of_time: bool = False
    # While `build` searches: what its renders worked out (`_Renders`), dropped after it.
    _renders: _Renders | None = field(default=None, repr=False, compare=False)
    # The text `build` ended with, and what it is the text of (`_shape`): `render` gives it
    # again while the index is as `build` left it, without laying its rows out once more.
    _built: tuple[tuple[Any, ...], str] | None = field(default=None, repr=False, compare=False)

    @property
    def left(self) -> int:
        """How many distinct artifacts left the context (carried ones included)."""
        return len(self.entries) + len(self.in_summary) + len(self.in_kept) + len(self.cut)

    @classmethod
    def build(
        cls,
        leaving: Sequence[FoundArtifact],
        calls: Counter[str],
        *,
        summary_text: str,
        kept: Iterable[Msg],
        counter: TokenCounter,
        budget: int,
        events_file: str | None,
        stored: Container[str] = frozenset(),
        cut_before: int = 0,
        kept_scanned: Sequence[Scanned] | None = None,
        grouped: bool = True,
        fill: bool = True,
        extra: int = 0,
        clock: IndexClock | None = None,
    ) -> ArtifactIndex:
        """Check each artifact against the new context and list the ones named nowhere,
        within `budget` tokens, in `in_order`'s order: what left with this compaction before
        what the index it replaces carried, what left named twice or more first, then each
        message's cheapest in turn (the most names within the budget, every message named).

        Args:
            leaving: the artifacts of what leaves, with those carried from the summary and
                index this compaction replaces.
            calls: the tool calls that leave, by name.
            summary_text: the text of the new summary (without the index).
            kept: the messages that stay in the context.
            counter: counts the index's lines.
            budget: tokens the index may take.
            events_file: where the whole list is written (named when the budget cuts).
            stored: the files the workspace stored for the session (`StoredFiles`): one of
                these that left leads the order and never makes way (see `FoundArtifact`).
            cut_before: artifacts earlier compactions cut.
            kept_scanned: `scan_messages(kept)`, when it was run already.
            grouped: whether an entry the budget leaves out whole may be folded into the row
                of its directory or command (see `_layout`).
            fill: whether the budget is filled counted exactly (False: by the estimate
                alone, the layout of one entry a value as it was before groups).
            extra: tokens the index may take beyond `budget` to name what left with this
                compaction when `budget` cannot (what the summary left unused of its own
                budget); never spent on what it carries from the index it replaces.
            clock: how long the search for the layout that names the most may take (no
                limit when None).
        """
        clock = clock or IndexClock()
        still = named_values(kept, kept_scanned)
        index = cls(calls=Counter(calls), cut_before=cut_before, budget=budget)
        index._renders = _Renders(counter, events_file)
        try:
            index._build(
                leaving,
                calls,
                summary_text,
                counter,
                budget,
                events_file,
                still,
                stored,
                grouped=grouped,
                fill=fill,
                extra=extra,
                clock=clock,
            )
            # (The compaction renders it next: a look-up while the renders are kept.)
            index._built = (index._shape(events_file), index.render(events_file))
        finally:
            index._renders = None
        return index

    def _build(
        self,
        leaving: Sequence[FoundArtifact],
        calls: Counter[str],
        summary_text: str,
        counter: TokenCounter,
        budget: int,
        events_file: str | None,
        still: set[Key],
        stored: Container[str],
        *,
        grouped: bool,
        fill: bool,
        extra: int,
        clock: IndexClock,
    ) -> None:
        """`build`'s work, on the index it made (see there)."""
        index = self
        summary = Substrings(summary_text.split("\n"), asked=len(leaving))
        waiting: list[FoundArtifact] = []
        for found in leaving:
            if (found.kind, found.value) in still:
                index.in_kept.append(found)
            elif all(summary.names(p, found.kind) for p in found.value.split(NEWLINE_MARK)):
                index.in_summary.append(found)
            else:
                waiting.append(found)
        # A file the workspace stored (`stored`, never judged by its path) leads the order,
        # and, when the index it replaces carried it, leads as what left now does (it never
        # makes way for it, as other carried entries do).
        waiting = [_judged(f, f.value in stored) for f in waiting]
        # In the index's order (`in_order`), each costing its value's length.
        waiting = in_order(waiting, [len(f.value) for f in waiting])
        # What is always said (how many are cut and where they are listed) is paid first;
        # then the entries, each whole on its line's row, in that order, at what it adds to
        # the index by estimate (`IndexRows`): the layout before groups; then the tally of
        # calls, when it fits.
        spent = index._count(counter, index.render_with([], len(waiting), events_file))
        header = counter.count_text(HEADER) + 1
        known = self._renders.lines if self._renders is not None else {}
        rows = IndexRows(lambda text: count_known(counter, text, known))
        inside: list[FoundArtifact] = []  # each inside an entry's text (a command's path)
        rest: list[FoundArtifact] = []
        unweighed: list[FoundArtifact] = []
        held = Substrings(asked=min(len(waiting), 2 * _weighed_past(0)))  # the values it holds
        stop = len(waiting)  # once the budget refuses an entry, this many more are weighed
        refused_fresh = False  # (what is carried then makes way for what left now)
        for position, found in enumerate(waiting):
            if position >= stop:
                unweighed = waiting[position:]
                break
            if held.names(found.value, found.kind):
                inside.append(found)
                continue
            cost = rows.cost(found) + (0 if index.entries else header)
            if spent + cost > budget or (refused_fresh and not found.fresh):
                rest.append(found)
                refused_fresh = refused_fresh or found.fresh
                if stop == len(waiting):
                    stop = min(stop, position + _weighed_past(len(index.entries)))
                continue
            index.entries.append(found)
            rows.add(found)
            held.add(found.value)
            spent += cost
        tally = index._tally()
        index.show_calls = bool(tally) and spent + counter.count_text(tally) + 1 <= budget
        summarised = len(index.in_summary)
        if fill:
            inside += index._fill(rest, rows, held, counter, events_file, clock)
        else:
            index.cut += rest
        index._fit(rows, inside, counter, events_file)
        if fill and index._drop_inside(rows):
            # The room the entries inside others left: the cut entries that now fit.
            index.in_summary += index._top_up(rows, counter, events_file, clock)
        if grouped and fill and (index.cut or unweighed) and not clock.ran_out:
            # Folded, the budget may name more; of what it names, as many as it still holds
            # stay whole (a plain substring search of the context finds those whole).
            folds = Folds(waiting)
            fresh = folds.fresh() if extra > 0 else folds
            folds.ratio = fresh.ratio = index._chars_per_token(counter, events_file)
            # What left now that surely does not fit folded goes straight to the summary's
            # spare room, without a search within the budget alone first.
            overflows = extra > 0 and fresh.overflows(budget)
            folding = None if overflows else most_folded(index, folds, counter, events_file, clock)
            if overflows:
                fresh_cut = True
            elif folding is None:
                fresh_cut = any(f.fresh for f in (*index.cut, *unweighed))
            else:
                fresh_cut = any(f.fresh for f in folds.order[folding.taken :])
            if extra > 0 and fresh_cut and not clock.ran_out:
                # What left now and does not fit: the summary's spare room names it, and the
                # entries carried from the index this one replaces make way.
                index.budget += extra
                stretched = most_folded(index, fresh, counter, events_file, clock, folding)
                if stretched is not None:
                    folds, folding = fresh, stretched
                else:
                    index.budget -= extra
                    if overflows and not clock.ran_out:
                        folding = most_folded(index, folds, counter, events_file, clock)
            if folding is not None:
                take_folded(index, folds, folding, summarised, counter, events_file, clock)
                unweighed = []  # (each placed by the fold)
        index._settle(unweighed, events_file)
        index.out_of_time = clock.ran_out
        index.carried = index.in_summary + index.entries

    def _settle(self, unweighed: Sequence[FoundArtifact], events_file: str | None) -> None:
        """Put each artifact the index did not weigh with the cut, or with those named when
        the index's text holds it all the same (inside an entry, a row's head)."""
        if not unweighed:
            return
        text = Substrings(self.render(events_file).split("\n"), asked=len(unweighed))
        for found in unweighed:
            (self.in_summary if text.names(found.value, found.kind) else self.cut).append(found)

    def _drop_inside(self, rows: IndexRows) -> bool:
        """Name by the longer entry an entry whose value is inside it (a path inside the
        command that reads it), which the fill, shortest first, wrote on its own; whether
        there was one."""
        values = Substrings(dict.fromkeys(f.value for f in self.entries), asked=len(self.entries))
        found = False
        for position in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[position]
            if values.holding(entry.value, entry.kind):
                del self.entries[position]
                rows.remove(position)
                self.in_summary.append(entry)
                found = True
        return found

    def _held(self, asked: int) -> Substrings:
        """The texts the index holds unbroken for its entries, for `asked` artifacts to be
        looked for: another artifact inside one of them is named by it."""
        return Substrings(
            (
                piece
                for entry in self.entries
                for piece in group_pieces(entry, key_of(entry) in self.folded)
            ),
            asked=asked,
        )

    def _exact(self, counter: TokenCounter, events_file: str | None, cut: int = -1) -> int:
        """The tokens the index takes as it stands, counted whole (`cut`: how many it says
        are cut, when not `len(self.cut)`)."""
        cut = len(self.cut) if cut < 0 else cut
        text = self.render_with(self.entries, cut, events_file, calls=self.show_calls)
        return self._count(counter, text)

    def _fill(
        self,
        rest: Sequence[FoundArtifact],
        rows: IndexRows,
        held: Substrings,
        counter: TokenCounter,
        events_file: str | None,
        clock: IndexClock,
    ) -> list[FoundArtifact]:
        """Fill the index to its budget counted exactly with the entries of `rest` (those
        the estimate left out, in the index's order), each whole. `held`: the values the
        entries hold. Returns the entries of `rest` inside one of those values.

        The estimate (`IndexRows`) is within two tokens a row of the rows counted whole with
        o200k and cl100k, but other counters differ more, and the rules and tally are counted
        apart. So `rest` is taken within an estimated budget, searched from the room
        counted exactly by what each fill tried takes (`most_within`), and the fill that
        names the most within the budget counted exactly is kept.
        """
        if not rest:
            return []
        base = len(self.entries)
        start = rows.tokens
        in_held = [held.names(found.value, found.kind) for found in rest]

        def take(limit: int) -> tuple[int, int, list[FoundArtifact]]:
            """Fill within `limit` estimated tokens: how many it names, the tokens the index
            takes counted whole, and the entries inside another."""
            while len(self.entries) > base:
                self._give_back(rows)  # (counted as they were added)
            self.cut = []
            inside: list[FoundArtifact] = []
            added = Substrings(asked=len(rest))
            refused_fresh = False  # (what is carried then makes way for what left now)
            for found, known in zip(rest, in_held, strict=True):
                if known or added.names(found.value, found.kind):
                    inside.append(found)
                    continue
                if rows.tokens - start + rows.cost(found) > limit or (
                    refused_fresh and not found.fresh
                ):
                    self.cut.append(found)
                    refused_fresh = refused_fresh or found.fresh
                    continue
                self.entries.append(found)
                rows.add(found)
                added.add(found.value)
            named = len(self.entries) - base + len(inside)
            return named, self._exact(counter, events_file), inside

        named, exact, _ = take(-1)
        best = [(named if exact <= self.budget else -1, -1)]  # named, limit
        over = [len(rest) + base + 1]  # the fewest a fill over the budget named

        def measure(limit: int) -> int:
            named, tokens, _ = take(limit)
            if tokens <= self.budget:
                best[0] = max(best[0], (named, limit))
            else:
                over[0] = min(over[0], named)
            return tokens

        room = self.budget - exact
        # Within `most` estimated tokens every entry of `rest` is taken (each costs at most
        # what it costs alone now): when that fits, there is nothing to search.
        most = sum(rows.cost(f) for f, known in zip(rest, in_held, strict=True) if not known)
        high = min(2 * room + 8, most)
        if room > 0 and clock.step() and measure(high) > self.budget:
            guess = min(room, high - 1)
            most_within(
                measure,
                0,
                high - 1,
                guess,
                self.budget,
                clock,
                known=(-1, exact),
                near=max(1, room // 256),  # (a limit a few tokens short leaves an entry out)
                slack=slack(self.budget),
                # Limits between a fill that fits and one that names one more do no better.
                enough=lambda: over[0] - best[0][0] <= 1,
            )
        inside = take(best[0][1])[2]
        return inside + self._top_up(rows, counter, events_file, clock)

    def _top_up(
        self, rows: IndexRows, counter: TokenCounter, events_file: str | None, clock: IndexClock
    ) -> list[FoundArtifact]:
        """Take each cut entry that fits whole, counted exactly (the estimate is close to the
        count, so few are worth trying: none estimated at more than a token over the room
        left, none at as much as one that did not fit, and nothing carried while what left
        now is cut); returns the cut entries inside a value the index holds (named by it).

        The entries are tried in batches, each counted once: those the room holds by
        estimate, then twice as many as the last batch that fitted, back to one after a batch
        that did not fit (whose entries are tried again). When they all fit, that is a few
        counts, not one an entry.
        """
        inside: list[FoundArtifact] = []
        room = self.budget - self._exact(counter, events_file)
        held = self._held(len(self.cut))
        refused: int | None = None  # the least estimate of an entry that did not fit
        fresh_cut = sum(f.fresh for f in self.cut)  # (what is carried makes way for them)
        queue, still_cut = deque(self.cut), []
        cut = len(queue)  # how many are cut as it goes
        batch: list[tuple[FoundArtifact, int]] = []  # taken, not yet counted: with its cost
        size, spent = 1, 0  # the batch's size, and what its entries cost by estimate
        # The first batch takes what the room holds by estimate.
        first = room
        while queue or batch:
            if queue and (len(batch) < size or spent < first):
                found = queue.popleft()
                if held.names(found.value, found.kind):
                    inside.append(found)
                    cut -= 1
                    fresh_cut -= found.fresh
                    continue
                left = room - spent
                cost = rows.cost(found) if left > 0 else 0
                if (
                    left <= 0
                    or cost > left + 1
                    or (refused is not None and cost >= refused)
                    or (fresh_cut and not found.fresh)
                ):
                    still_cut.append(found)
                    continue
                self.entries.append(found)
                rows.add(found)
                batch.append((found, cost))
                spent += cost
                continue
            if not clock.step():
                for _ in batch:
                    self.entries.pop()
                    rows.remove_last()
                still_cut += [found for found, _ in batch] + list(queue)
                break
            exact = self._exact(counter, events_file, cut - len(batch))
            if exact <= self.budget:
                room = self.budget - exact
                cut -= len(batch)
                for found, _ in batch:
                    held.add(found.value)
                    fresh_cut -= found.fresh
                size = 2 * max(size, len(batch))
            else:
                for _ in batch:
                    self.entries.pop()
                    rows.remove_last()
                if len(batch) == 1:
                    found, cost = batch[0]
                    still_cut.append(found)
                    refused = cost if refused is None else min(refused, cost)
                else:
                    queue.extendleft(found for found, _ in reversed(batch))
                size = 1
            batch, spent, first = [], 0, 0
        self.cut = still_cut
        return inside

    def _give_back(self, rows: IndexRows) -> None:
        """Put the entry taken last back in the cut."""
        self.cut.append(self.entries.pop())
        rows.remove_last()

    def _fit(
        self,
        rows: IndexRows,
        inside: Sequence[FoundArtifact],
        counter: TokenCounter,
        events_file: str | None,
    ) -> None:
        """Give entries back to the cut, the last taken first, until the index counted
        whole is within its budget (the estimate is close to the count, so this rarely
        takes any back; how many is searched by halves); then each entry of
        `inside` is named when an entry still holds it, cut otherwise."""
        if self.entries and self._exact(counter, events_file) > self.budget:
            # The most entries, in the order taken, that fit: `low` fit (none fits always:
            # the budget is never below what the index always says), `high` did not.
            taken = list(self.entries)
            low, high = 0, len(taken)
            while high - low > 1:
                middle = (low + high) // 2
                text = self.render_with(
                    taken[:middle],
                    len(self.cut) + len(taken) - middle,
                    events_file,
                    calls=self.show_calls,
                )
                if self._count(counter, text) <= self.budget:
                    low = middle
                else:
                    high = middle
            while len(self.entries) > low:
                self._give_back(rows)
        held = self._held(len(inside))
        for found in inside:
            (self.in_summary if held.names(found.value, found.kind) else self.cut).append(found)

    @staticmethod
    def least_tokens(counter: TokenCounter, events_file: str | None) -> int:
        """What the index costs at least, when artifacts leave: its line saying how many
        were cut and where they are listed (counted for a cut of six digits)."""
        return counter.count_text(ArtifactIndex().render_with([], 999_999, events_file)) + 4

    def _tally(self) -> str:
        if not self.calls:
            return ""
        tally = ", ".join(f"{name} x{n}" for name, n in self.calls.most_common(12))
        more = len(self.calls) - 12
        return f"Tool calls that left: {tally}" + (f", and {more} other tools" if more > 0 else "")

    def render(self, events_file: str | None) -> str:
        """The index as it follows the summary in the context; "" when there is nothing to
        say."""
        built = self._built
        if built is not None and built[0] == self._shape(events_file):
            return built[1]
        return self.render_with(self.entries, len(self.cut), events_file, calls=self.show_calls)

    def _shape(self, events_file: str | None) -> tuple[Any, ...]:
        """What the index's text is made of: equal shapes render the same text."""
        return (
            tuple(self.entries),
            len(self.cut),
            self.show_calls,
            frozenset(self.folded),
            self.cut_before,
            tuple(self.calls.items()),
            events_file,
        )

    def render_with(
        self,
        entries: Sequence[FoundArtifact],
        cut: int,
        events_file: str | None,
        *,
        calls: bool = False,
    ) -> str:
        """The index with `entries`, `cut` artifacts cut now, and the tally of calls when
        `calls`."""
        renders = self._renders
        if renders is None or renders.events_file != events_file:
            return self._render(entries, cut, events_file, calls, None)
        key = (tuple(map(id, entries)), cut, calls, frozenset(self.folded))
        text = renders.texts.get(key)
        if text is None:
            text = renders.texts[key] = self._render(
                entries, cut, events_file, calls, renders.layouts
            )
        return text

    def _render(
        self,
        entries: Sequence[FoundArtifact],
        cut: int,
        events_file: str | None,
        calls: bool,
        layouts: Layouts | None,
    ) -> str:
        lines: list[str] = []
        if entries:
            rows, rules = render_rows(entries, self.folded, layouts)
            lines += [HEADER, *rules, *rows]
        if calls and self.calls:
            lines.append(self._tally())
        total_cut = cut + self.cut_before
        if total_cut:
            where = events_file or "the session's events.jsonl"
            lines.append(
                f'{total_cut} more artifacts are listed in {where} (lines of kind "artifacts").'
            )
        if not lines:
            return ""
        # Its values are what tools and models wrote: `tagged` keeps them from closing it.
        return tagged("artifact_index", "\n".join(lines))

    def _count(self, counter: TokenCounter, text: str) -> int:
        """The tokens of `text`, an index this one rendered (each text counted once while
        `build` searches)."""
        renders = self._renders
        if renders is None or renders.counter is not counter:
            return counter.count_text(text)
        tokens = renders.tokens.get(text)
        if tokens is None:
            # (Most of its lines were counted in an index rendered before.)
            tokens = renders.tokens[text] = count_by_lines(counter, text, renders.lines)
        return tokens

    def _chars_per_token(self, counter: TokenCounter, events_file: str | None) -> float:
        """How many characters a token of the index as it stands holds (3.0 when it is too
        short to say); its text was counted as the search fitted it, so this is a look-up."""
        text = self.render(events_file)
        tokens = self._count(counter, text) if len(text) >= 200 else 0
        return len(text) / tokens if tokens else 3.0

    def report(self) -> dict[str, int | bool]:
        """The counts a compaction event holds (and `out_of_time` when the clock ran
        out)."""
        counts: dict[str, int | bool] = {
            "left": self.left,
            "in_summary": len(self.in_summary),
            "in_kept": len(self.in_kept),
            "indexed": len(self.entries),
            "cut": len(self.cut),
            "budget": self.budget,
        }
        if self.out_of_time:
            counts["out_of_time"] = True
        return counts

    def listing(self) -> list[dict[str, Any]]:
        """Every artifact that left, with what became of it: the `artifacts` event's list."""
        out: list[dict[str, Any]] = []
        for status, group in (
            ("summary", self.in_summary),
            ("kept", self.in_kept),
            ("index", self.entries),
            ("cut", self.cut),
        ):
            out.extend({**f.to_json(), "status": status} for f in group)
        return out


class _Renders:
    """What the renders of one `ArtifactIndex.build` worked out, for the next ones: its
    search renders and counts a dozen indexes or more, many the same as one before (each
    text by the entries, cut, tally and folding it was rendered with), and most of the rest
    differ from one before by a few entries (`Layouts`).

    The entries are told apart by their identity: every one rendered is held by `layouts`,
    and the whole is dropped when the build is done."""

    __slots__ = ("counter", "events_file", "layouts", "lines", "texts", "tokens")

    def __init__(self, counter: TokenCounter, events_file: str | None) -> None:
        self.counter = counter
        self.events_file = events_file
        self.layouts = Layouts()
        self.texts: dict[tuple[tuple[int, ...], int, bool, frozenset[Key]], str] = {}
        self.tokens: dict[str, int] = {}
        self.lines: dict[str, int] = {}  # texts counted (`count_by_lines`, `count_known`)


def _judged(found: FoundArtifact, stored: bool) -> FoundArtifact:
    """`found` as a file the workspace stored (and then fresh), or as none."""
    if stored and not (found.stored and found.fresh):
        return replace(found, fresh=True, stored=True)
    if not stored and found.stored:
        return replace(found, stored=False)
    return found


def events_file(reference: str | None) -> str | None:
    """The session's events.jsonl beside the context log `reference`, when it is named so."""
    if reference is None or not reference.endswith(CONTEXT_FILE):
        return None
    return reference[: -len(CONTEXT_FILE)] + EVENTS_FILE
