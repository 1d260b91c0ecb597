"""What `ctxoffload eval` prints: one report as tables per compaction and per category, or
the strategies side by side, best first; the probes alone for `--probes`; JSON for `--json`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._disk.wording import plural
from ._arguments import EXIT_OK
from ._output import json_text

__all__ = ["Unit", "print_probes", "print_reports"]

_COUNTS = ("asked", "no_tools", "one_read", "not_at_all", "tokens_no_tools", "tokens_one_read")


@dataclass
class Unit:
    """One session evaluated under one strategy.

    Attributes:
        label: the strategy as the user chose it (`extractive`, `written`, `window`, ...).
        strategy: `evaluate`'s strategy for it.
        workdir: the workspace's folder (a temporary one for a transcript).
        session: the session.
        report: the plan (no model) and then the run's report.
    """

    label: str
    strategy: str
    workdir: str
    session: str
    report: Any = field(default=None)


def _no_compaction(target: str) -> str:
    return f"{target} made no compaction: nothing left its context, nothing to ask"


def print_probes(units: list[Unit], *, as_json: bool) -> int:
    """Print the probes of the units' sessions (the first strategy's: the probes are the
    same under every strategy of a session)."""
    first = units[0].label if units else None
    mine = [u for u in units if u.label == first]
    probes = [p for u in mine for p in u.report.not_asked]
    if as_json:
        sessions = [u.session for u in mine]
        print(json_text({"session": ", ".join(sessions), "probes": [p.as_dict() for p in probes]}))
        return EXIT_OK
    compactions = sum(u.report.plan.compactions for u in mine)
    if not compactions:
        print(_no_compaction(f"session {', '.join(u.session for u in mine)}"))
        return EXIT_OK
    for probe in probes:
        print(f"compaction {probe.compaction} · {probe.category} · {probe.where}")
        print(f"  Q: {probe.question}")
        print(f"  A: {probe.answer}")
    print(f"{plural(len(probes), 'probe')} over {plural(compactions, 'compaction')}")
    return EXIT_OK


def _share(count: int, asked: int) -> str:
    return f"{count}/{asked} ({100 * count // asked}%)" if asked else "-"


def _columns(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _grading(report: Any) -> str:
    grading = report.plan.grading
    if grading.startswith("judge "):
        return f"open probes graded by {grading}, with a rubric (its verdicts in --json)"
    return "open probes graded by their key terms (no --judge); artifacts by exact match"


def _text(report: Any) -> str:
    plan = report.plan
    lines = [
        f"session {plan.session}: {plural(plan.compactions, 'compaction')}, "
        f"{plural(len(report.results), 'probe')} asked, {plural(report.calls, 'model call')}; "
        f"read-back tools: {', '.join(plan.tools)}",
        _grading(report),
    ]
    if report.not_asked:
        lines.append(f"{len(report.not_asked)} probes not asked: --max-calls {plan.max_calls}")
    header = ("", "asked", "no tools", "one read", "not at all", "tokens no tools/one read")
    rows = [header]
    for label, table in (
        ("compaction", report.by_compaction()),
        ("", report.by_category()),
        ("", report.table(lambda p: "all")),
    ):
        for row in table:
            rows.append(
                (
                    f"{label} {row['group']}".strip(),
                    str(row["asked"]),
                    _share(row["no_tools"], row["asked"]),
                    _share(row["one_read"], row["asked"]),
                    _share(row["not_at_all"], row["asked"]),
                    f"{row['tokens_no_tools']:,}/{row['tokens_one_read']:,}",
                )
            )
    lines += _columns(rows)
    if not report.results:
        lines.append("no probe: nothing that left the context is missing from what came after")
    return "\n".join(lines)


def _total(units: list[Unit]) -> dict[str, Any]:
    """The counts of the units' reports summed, with the tokens the strategy spent (its
    replies and its own summaries; the judge's are not the strategy's)."""
    total: dict[str, Any] = dict.fromkeys(_COUNTS, 0)
    total["group"] = "all"
    for unit in units:
        for row in unit.report.table(lambda p: "all"):
            for key in _COUNTS:
                total[key] += row[key]
    total["tokens_summaries"] = sum(u.report.summary_tokens for u in units)
    total["tokens"] = (
        total["tokens_no_tools"] + total["tokens_one_read"] + total["tokens_summaries"]
    )
    return total


def print_reports(
    units: list[Unit], strategies: list[str], target: str, calls: int, *, as_json: bool
) -> int:
    """Print the run's reports: one report as it is, several strategies side by side
    (`calls`: every call the run made, the written replay's summaries included)."""
    if len(units) == 1 and len(strategies) == 1:
        report = units[0].report
        if as_json:
            print(json_text({"session": units[0].session, **report.as_dict()}))
        elif report.plan.compactions == 0:
            print(_no_compaction(f"session {units[0].session}"))
        else:
            print(_text(report))
        return EXIT_OK
    by_label = {label: [u for u in units if u.label == label] for label in strategies}
    totals = {label: _total(mine) for label, mine in by_label.items()}
    ranked = sorted(
        strategies,
        key=lambda s: (-totals[s]["one_read"], -totals[s]["no_tools"], totals[s]["tokens"]),
    )
    if as_json:
        sessions = sorted({u.session for u in units})
        entries = []
        for label in strategies:
            mine = by_label[label]
            single = mine[0].report.as_dict() if len(mine) == 1 else {}
            entries.append(
                {
                    "strategy": label,
                    **single,
                    "calls": sum(u.report.calls for u in mine),
                    "total": [totals[label]],
                    "sessions": [{"session": u.session, **u.report.as_dict()} for u in mine],
                }
            )
        print(
            json_text(
                {
                    "target": target,
                    "session": sessions[0] if len(sessions) == 1 else sessions,
                    "grading": units[0].report.plan.grading if units else None,
                    "ranking": ranked,
                    "calls": calls,
                    "strategies": entries,
                }
            )
        )
        return EXIT_OK
    if not any(u.report.plan.compactions for u in units):
        print(_no_compaction(target))
        return EXIT_OK
    header = ("strategy", "asked", "no tools", "one read", "not at all", "tokens")
    rows = [header]
    for label in ranked:
        sums = totals[label]
        rows.append(
            (
                label,
                str(sums["asked"]),
                _share(sums["no_tools"], sums["asked"]),
                _share(sums["one_read"], sums["asked"]),
                _share(sums["not_at_all"], sums["asked"]),
                f"{sums['tokens']:,}",
            )
        )
    print(f"{target}: the probes after what each strategy sends, best first ({calls} calls)")
    print(_grading(units[0].report))
    for line in _columns(rows):
        print(line)
    left = sum(len(u.report.not_asked) for u in units)
    if left:
        print(f"{left} probes not asked: --max-calls")
    return EXIT_OK
