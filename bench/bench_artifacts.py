"""How much of what leaves the context stays named in the next one: the artifact index.

Replays every conversation of ../shared/corpus (the same readers the tests use) through a
`Compressor` at windows of 8k, 16k and 32k tokens, with two summarisers: the extractive one,
and a scripted summary model that keeps no path, command or id at all (the worst case of a
real one). Right after each compaction it takes the artifacts (paths, URLs, commands, ids)
of the messages that left (the extractor of `compression/_index/_artifacts.py`) and looks for each
in the context the model is sent next:

- `no index`: in the context without its `<artifact_index>` (what the summary and the kept
  messages name: the context as it was before issue 25);
- `before`: in the context with the index laid out as before groups (each entry whole on its
  line's row, the budget spent by estimate), rebuilt from the same compaction's entries
  within the same budget (`ArtifactIndex.build(..., grouped=False, fill=False)`, in today's
  order of entries), measured in this run;
- `filled`: the same, filled to the budget counted exactly, whole entries only
  (`grouped=False`): what filling alone gives;
- `whole`: in the whole context, the index as it is included, as a plain substring (the
  full path, the full command); and how many compactions name fewer this way than `before`
  (the index names the most it can folded, then keeps whole what its budget still holds);
- `read`: whole, or named by a row of the index read as its header says (the tree of paths:
  `- src/ (line 4): a.py b/c.py` is src/a.py, src/b/c.py and the folders on their way, a
  leading `./` left off, and an indented row goes on from the path and the lines of the row
  it is under; under a line, `sed … f.py: -n 1,9p | -n 9,30p` is `sed -n 1,9p f.py` and
  `sed -n 9,30p f.py`), read by this script's own parser;
- `listed`: named, or counted on the index's last line and listed in events.jsonl.

It prints the shares (overall, then by kind), how many compactions the index's budget cut
entries from, the summary message's size in tokens (the index included, and without it),
how many compactions took the summary's spare room (the index names what left now with what
the summary left of its own budget, when the index's budget is not set), and how many of the
entries the replaced index named are named again.

    python bench/bench_artifacts.py                     # every corpus file, three windows
    python bench/bench_artifacts.py --windows 16000     # one window
    python bench/bench_artifacts.py --index-share 1.0   # the index's own budget, set
    python bench/bench_artifacts.py --index-share 0.25  # a smaller index
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import FoundArtifact, find_artifacts
from ctxoffload.text import message_lines
from ctxoffload.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tests" / "compression"))
from corpus import conversations  # noqa: E402  (the tests' corpus readers)

FIELDS = (
    "task_overview",
    "current_state",
    "important_discoveries",
    "next_steps",
    "context_to_preserve",
)
MEASURES = ("none", "flat", "filled", "whole", "read", "listed")
KINDS = ("path", "command", "id", "url")


@dataclass
class Tally:
    artifacts: Counter[str] = field(default_factory=Counter)  # by kind
    named: dict[str, Counter[str]] = field(
        default_factory=lambda: {measure: Counter() for measure in MEASURES}
    )
    compactions: int = 0
    cut: int = 0
    flat_cut: int = 0
    summary_tokens: list[int] = field(default_factory=list)
    index_tokens: list[int] = field(default_factory=list)
    flat_tokens: list[int] = field(default_factory=list)
    fewer: int = 0  # compactions whose whole-substring measure is below `before`'s
    folded: int = 0  # compactions whose index folds entries into group rows
    stretched: int = 0  # compactions whose index took the summary's spare room
    carried: int = 0  # entries the replaced index named, weighed again
    carried_named: int = 0  # of those, named again (not cut)
    dumps: list[Dump] = field(default_factory=list)  # each compaction's misses (`--dump`)


@dataclass
class Dump:
    """A compaction's index and the artifacts neither it nor the context names (`--dump`)."""

    source: str
    index: str
    misses: list[str]
    parts: dict[str, int]  # the index's tokens by what they are (`token_parts`)


def pathless() -> ScriptedModel:
    """A summary model whose every field is plain prose, with no artifact in it."""
    reply = {name: "The agent is working on the task and has made progress." for name in FIELDS}
    return ScriptedModel([], default=json.dumps(reply))


async def replay(
    path: Path, window: int, summariser: str, tally: Tally, share: float | None
) -> None:
    source = f"{path.name} {window} {summariser}"
    counter = get_token_counter(exact=True)
    config = ContextConfig(context_window=window)
    if share is not None:
        index = int(share * config.summary_budget_tokens(window))
        config = ContextConfig(context_window=window, artifact_index_tokens=index)
    for conversation in conversations(path)[:1]:
        with tempfile.TemporaryDirectory() as tmp:
            ws = LocalWorkspace(tmp)
            comp = Compressor(
                config,
                model=pathless() if summariser == "model" else None,
                offloader=ws,
                session_id="bench",
                counter=counter,
            )
            context: list[Msg] = []
            for msg in conversation:
                if msg.role == "assistant":
                    given = {m.id: m for m in context}
                    result = await comp.maybe_compress(context)
                    context = result.messages
                    if result.compressed:
                        budget = config.artifact_index_budget(window)
                        await measure(ws, given, context, tally, counter, source, budget)
                context.append(await comp.process_message(msg) if msg.role == "tool" else msg)


# The rows of the index, as its header describes them: `- line 4: v | w` and, under it,
# `  - program … last: x | y`; under `- on several lines:`, each item followed by its line
# (`  - sed … f: x (line 4); y (line 9)`); the tree of paths, `- dir/ (line 4): a b/c`
# (dir/a and dir/b/c) with the rows indented under it going on from its path. This reader is
# the bench's own, written from the header's words, not the library's renderer run backwards.
_ROW = re.compile(r"^- (?:line \d+|no line):(.*)$")
_UNDER = re.compile(r"^  - (.+?): (.*)$")
_MARK = re.compile(r" \((?:line \d+|no line)\)$")
_TREE = re.compile(r"^((?:  )*)- (\S*/)(?: \((?:lines? [\d, -]+|no line)\))?:(?: (.*))?$")


def read_index(index: str) -> set[str]:
    """Every value the index's rows name, read as its header says."""
    named: set[str] = set()
    heads: list[str] = []  # the path of each tree row above, by depth
    for row in index.splitlines():
        if found := _TREE.match(row):
            indent, head, items = found.groups()
            depth = len(indent) // 2
            heads[depth:] = [(heads[depth - 1] if depth else "") + head]
            named.add(heads[depth].removesuffix("/"))
            for item in (items or "").split(" "):
                # An item names its path and the folders on its way there.
                parts = (heads[depth] + item).split("/")
                named.update("/".join(parts[:end]) for end in range(1, len(parts) + 1))
        elif found := _ROW.match(row):
            first, *spaced = found.group(1).split(" | ")
            named.update(word for word in first.split(" ") if word)
            named.update(spaced)
        elif found := _UNDER.match(row):
            head, body = found.groups()
            for part in body.split("; "):
                items = _MARK.sub("", part)
                if " … " in head:
                    program, _, last = head.partition(" … ")
                    named.update(f"{program} {middle} {last}" for middle in items.split(" | "))
    return named


async def measure(
    ws: LocalWorkspace,
    given: dict[str, Msg],
    context: list[Msg],
    tally: Tally,
    counter: TokenCounter,
    source: str = "",
    default_budget: int = 0,
) -> None:
    live = {m.id for m in context}
    left = [m for i, m in given.items() if i not in live and not m.metadata.get("ctxoffload")]
    found, _ = find_artifacts(left)
    summary = next(m for m in context if (m.metadata.get("ctxoffload") or {}).get("kind"))
    # The context as text, the way the artifacts were found (`message_lines`), with and
    # without the index that follows the summary.
    body, _, rest = summary.text.partition("<artifact_index>")
    index = "<artifact_index>" + rest if rest else ""
    others = [m for m in context if m is not summary]
    without = "\n".join("\n".join(message_lines(m)) for m in others) + "\n" + body
    text = without + "\n" + index
    events = await ws.read_events("bench")
    report = events[-1].get("artifacts") or {}
    listing = next(
        (e.get("artifacts") or [] for e in reversed(events) if e.get("kind") == "artifacts"), []
    )
    session = ws.session_dir("bench")
    # What the replaced index named and this one weighs again (not among what left now).
    fresh = {(f.kind, f.value) for f in found}
    carried = [e for e in listing if (e["kind"], e["value"]) not in fresh]
    tally.carried += len(carried)
    tally.carried_named += sum(e["status"] != "cut" for e in carried)
    tally.stretched += report.get("budget", 0) > default_budget
    flat = flat_index(listing, body, others, counter, report, session, fill=False)
    filled = flat_index(listing, body, others, counter, report, session, fill=True)
    tally.compactions += 1
    tally.cut += bool(report.get("cut"))
    tally.flat_cut += bool(flat.cut)
    tally.folded += "\n  - " in index
    flat_text = flat.render(str(session / "events.jsonl"))
    filled_text = filled.render(str(session / "events.jsonl"))
    tally.summary_tokens.append(counter.count_text(summary.text))
    tally.index_tokens.append(counter.count_text(index) if index else 0)
    tally.flat_tokens.append(counter.count_text(flat_text) if flat_text else 0)
    read = read_index(index)
    listed = {e["value"] for e in await listed_values(ws)}
    strict = before = 0
    misses: list[str] = []
    for artifact in found:
        value = artifact.value.removesuffix(" […]")
        kind = artifact.kind
        whole = value in text
        tally.artifacts[kind] += 1
        tally.named["none"][kind] += value in without
        tally.named["flat"][kind] += value in without or value in flat_text
        tally.named["filled"][kind] += value in without or value in filled_text
        tally.named["whole"][kind] += whole
        strict += whole
        before += value in without or value in flat_text
        # A tree row leaves a path's leading `./` off (`./src/a.py` is src/a.py).
        tree = kind == "path" and value.startswith("./") and value[2:] in read
        tally.named["read"][kind] += whole or artifact.value in read or tree
        if not (whole or artifact.value in read or tree):
            misses.append(f"{kind}\t{artifact.where()}\t{artifact.value}")
        tally.named["listed"][kind] += (
            whole or artifact.value in read or tree or artifact.value in listed
        )
    tally.fewer += strict < before
    if misses:
        parts = token_parts(index, counter)
        tally.dumps.append(Dump(f"{source} #{tally.compactions}", index, misses, parts))


_HEAD_PARTS = {  # what in an index's text names nothing, by what it is
    "marks": re.compile(r" \((?:lines? [\d, -]+|no line)\)|^- (?:line \d+|no line):", re.M),
    "separators": re.compile(r" \| "),
    "tree heads": re.compile(r"^(?:  )*- \S*/(?=[ :])", re.M),
}


def token_parts(index: str, counter: TokenCounter) -> dict[str, int]:
    """The tokens of an index's text by what they are: its header (the first line and the
    rules), its line marks, its separators, its tree rows' heads, and the rest (the names).
    Each part is what the text loses in tokens without it."""
    lines = index.splitlines()
    body = [line for line in lines if line.startswith(("- ", "  "))]
    total = counter.count_text(index)
    parts = {"total": total, "header": total - counter.count_text("\n".join(body))}
    text = "\n".join(body)
    for name, pattern in _HEAD_PARTS.items():
        parts[name] = counter.count_text(text) - counter.count_text(pattern.sub(" ", text))
    parts["names"] = total - sum(parts[n] for n in ("header", *_HEAD_PARTS))
    return parts


def dump(tallies: dict[tuple[int, str], Tally], n: int, folder: Path) -> None:
    """Write the `n` compactions missing most to `folder`: each one's index, its misses and
    its tokens by part; print where they went."""
    worst = sorted((d for t in tallies.values() for d in t.dumps), key=lambda d: -len(d.misses))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nthe {n} compactions missing most, in {folder}:")
    for rank, found in enumerate(worst[:n], 1):
        name = folder / f"{rank:02}.txt"
        parts = ", ".join(f"{k} {v}" for k, v in found.parts.items())
        name.write_text(
            f"{found.source}: {len(found.misses)} missed\ntokens: {parts}\n\n{found.index}"
            "\n\nmissed (kind, line, value):\n" + "\n".join(found.misses) + "\n",
            encoding="utf-8",
        )
        print(f"  {name.name}  {found.source}: {len(found.misses)} missed; {parts}")


def flat_index(
    listing: list[dict[str, object]],
    summary_text: str,
    kept: list[Msg],
    counter: TokenCounter,
    report: dict[str, int],
    session: Path,
    *,
    fill: bool,
) -> ArtifactIndex:
    """The index of the same compaction with every entry whole: the entries it weighed (its
    `artifacts` event), checked against the same summary and kept messages, within the
    budget it had, spent by estimate as before (or filled counted exactly, `fill`)."""
    candidates = [f for f in map(FoundArtifact.from_json, listing) if f is not None]
    return ArtifactIndex.build(
        candidates,
        Counter(),
        summary_text=summary_text,
        kept=[m for m in kept if m.role != "system"],
        counter=counter,
        budget=int(report.get("budget", 0)),
        events_file=str(session / "events.jsonl"),
        grouped=False,
        fill=fill,
    )


async def listed_values(ws: LocalWorkspace) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for event in await ws.read_events("bench"):
        if event.get("kind") == "artifacts":
            out.extend(event.get("artifacts") or [])
    return out


def share(n: int, total: int) -> str:
    return f"{100 * n / total:5.1f}%" if total else "    -"


def mean(values: list[int]) -> float:
    return sum(values) / max(1, len(values))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[8_000, 16_000, 32_000])
    parser.add_argument(
        "--index-share",
        type=float,
        help="the index's budget as a share of the summary budget, set (so the summary's"
        " spare room is not taken); default: the config's, unset",
    )
    parser.add_argument(
        "--dump",
        type=int,
        default=0,
        metavar="N",
        help="write the N compactions missing most (index, misses, tokens by part) to /tmp",
    )
    args = parser.parse_args()
    files = sorted(p for p in CORPUS.glob("*") if p.name != "SOURCES.md")
    if not files:
        sys.exit(f"no corpus at {CORPUS}")
    budget = "the default" if args.index_share is None else f"{args.index_share:g} x summary budget"
    print(f"corpus: {len(files)} files in {CORPUS}; index budget: {budget}")
    tallies: dict[tuple[int, str], Tally] = {}
    for window in args.windows:
        for summariser in ("extractive", "model"):
            tally = tallies[(window, summariser)] = Tally()
            for path in files:
                await replay(path, window, summariser, tally, args.index_share)
    print(
        "\nnamed in the next context, of all artifacts that left (before: the index as it was,"
        " same entries and budget, by estimate; filled: whole entries to the budget counted"
        " exactly; whole: the index now, a plain substring; read: whole or by its tree and"
        " group rows)"
    )
    print(
        "window  summariser  compactions  artifacts  no index  before  filled   whole    read"
        "  listed  fewer  folded  budget cut  summary tokens (index; before)"
    )
    for (window, summariser), tally in tallies.items():
        total = sum(tally.artifacts.values())
        cells = "  ".join(f"{share(sum(tally.named[m].values()), total):>6}" for m in MEASURES[1:])
        print(
            f"{window:6,}  {summariser:10}  {tally.compactions:11}  {total:9,}"
            f"  {share(sum(tally.named['none'].values()), total):>8}  {cells}"
            f"  {tally.fewer:5}  {tally.folded:6}  {tally.cut:3} of {tally.compactions:<3}"
            f"  {mean(tally.summary_tokens):8,.0f} ({mean(tally.index_tokens):,.0f};"
            f" {mean(tally.flat_tokens):,.0f})"
        )
    print("\nby kind: before -> whole (read), of how many")
    print("window  summariser  " + "".join(f"{kind:>34}" for kind in KINDS))
    for (window, summariser), tally in tallies.items():
        cells = []
        for kind in KINDS:
            n = tally.artifacts[kind]
            flat, read = tally.named["flat"][kind], tally.named["read"][kind]
            whole = tally.named["whole"][kind]
            cells.append(
                f"{share(flat, n)} -> {share(whole, n)} ({share(read, n).strip()}) of {n:<5,}"
            )
        print(f"{window:6,}  {summariser:10}  " + "".join(f"{c:>34}" for c in cells))
    print(
        "\nthe index's room: compactions that took the summary's spare room to name what left"
        " (stretched), and of the entries the replaced index named, how many are named again"
    )
    print("window  summariser  stretched  carried named again")
    for (window, summariser), tally in tallies.items():
        print(
            f"{window:6,}  {summariser:10}  {tally.stretched:3} of {tally.compactions:<3}"
            f"  {share(tally.carried_named, tally.carried)} of {tally.carried:,}"
        )
    if args.dump:
        dump(tallies, args.dump, Path(tempfile.gettempdir()) / "bench_artifacts")


if __name__ == "__main__":
    asyncio.run(main())
