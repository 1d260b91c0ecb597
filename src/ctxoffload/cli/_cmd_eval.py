"""`ctxoffload eval SESSION --model URL/NAME`: what a model still knows after each compaction
of a session, with no tools and with one read (`ctxoffload.eval.evaluate`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from ..exceptions import CliError
from ._access import open_workspace, session_folder
from ._arguments import EXIT_OK, Workdir, add_workdir
from ._commands import COMMAND_HELP
from ._output import json_text
from ._session_name import SessionName

__all__ = ["model_endpoint", "register", "run"]

_MAX_CALLS = 200
_COMPARED = ("summary", "clearing", "window")
"""The strategies `--strategies` asks under, in this order (`evaluate`'s `strategy`)."""
_TIMEOUT = 60.0


def register(commands: Any) -> None:
    """Add the `eval` command to the `ctxoffload` subcommands."""
    parser = commands.add_parser(
        "eval",
        help=COMMAND_HELP["eval"],
        description=(
            "For each compaction of a session, ask a model questions whose answers left the "
            "context there, after the messages the agent was sent right after it: once with "
            "no tools, once with the agent's read-back tools (Read, Grep) and one round of "
            "calls. Artifacts (paths, commands, exit statuses, ids, error lines, numbers) are "
            "graded by exact match; the task, decisions and the state at the cut by their key "
            "terms. The number of model calls is printed before the first one."
        ),
    )
    parser.add_argument("session", metavar="SESSION", type=SessionName, help="the session")
    parser.add_argument(
        "--model",
        metavar="URL/NAME",
        help="the model: an OpenAI-compatible base URL and the model's name "
        "(http://127.0.0.1:8000/v1/qwen2.5-7b), or a name for OpenAI's API (gpt-4o-mini)",
    )
    parser.add_argument(
        "--key-env",
        metavar="VAR",
        default="OPENAI_API_KEY",
        help="the environment variable holding the API key (default: OPENAI_API_KEY); "
        "the key is never printed",
    )
    parser.add_argument(
        "--max-calls",
        type=int,
        default=_MAX_CALLS,
        metavar="N",
        help=f"stop before a probe that could take the run past N model calls "
        f"(default: {_MAX_CALLS})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on one model call after this long (default: {_TIMEOUT:g})",
    )
    parser.add_argument(
        "--probes", action="store_true", help="list the probes and exit: no model is called"
    )
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="ask the same probes after what each strategy would have sent (summary: the "
        "session as recorded; clearing: old tool outputs cleared, nothing summarised; window: "
        "a sliding window, no copy kept) and rank them side by side",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workdir(parser, bucket=False, database=False)
    parser.set_defaults(run=run)


def model_endpoint(text: str) -> tuple[str | None, str]:
    """`--model`'s value as (base URL or None for OpenAI's, model name).

    A URL is split after its `/v1/` when it has one (the name may hold a `/`:
    `http://host/v1/meta-llama/Llama-3`), else at its last `/`.

    Raises:
        CliError: a URL with no model name after it.
    """
    from .._secrets import masked_url

    if not text.startswith(("http://", "https://")):
        if not text.strip():
            raise CliError("--model is empty: pass URL/NAME or a model name")
        return None, text
    at = text.rfind("/v1/")
    base, name = (text[: at + 3], text[at + 4 :]) if at >= 0 else text.rsplit("/", 1)
    if not name or base.endswith(("http:/", "https:/")):
        raise CliError(
            f"--model {masked_url(text)!r} names no model: pass the base URL and the model's "
            "name, http://127.0.0.1:8000/v1/NAME"
        )
    return base, name


def run(args: argparse.Namespace) -> int:
    """Run `ctxoffload eval`; returns the exit status (0 done, 1 a model call failed,
    2 bad input)."""
    where = Workdir.of(args)
    if "://" in where.text:
        from .._secrets import masked_url

        raise CliError(
            f"--workdir {masked_url(where.text)!r} is not a folder: eval gives the model Read "
            "and Grep on the workspace's files; `ctxoffload export` writes a folder from it"
        )
    workdir = open_workspace(where, session=args.session)
    session = session_folder(workdir, args.session)
    if args.max_calls < 1:
        raise CliError(f"--max-calls {args.max_calls} is not a positive number of calls")
    if args.probes:
        return _list_probes(workdir, session, as_json=args.json)
    if args.model is None:
        raise CliError("eval needs --model URL/NAME (or --probes to list the probes only)")
    if not args.timeout > 0:
        raise CliError(f"--timeout {args.timeout} is not a positive number of seconds")
    base_url, name = model_endpoint(args.model)
    return asyncio.run(_evaluate(args, workdir, session, base_url, name))


def _list_probes(workdir: str, session: str, *, as_json: bool) -> int:
    from ..eval import find_probes

    compactions, probes = find_probes(workdir, session)
    if as_json:
        print(json_text({"session": session, "probes": [p.as_dict() for p in probes]}))
        return EXIT_OK
    if not compactions:
        print(_no_compaction(session))
        return EXIT_OK
    for probe in probes:
        print(f"compaction {probe.compaction} · {probe.category} · {probe.where}")
        print(f"  Q: {probe.question}")
        print(f"  A: {probe.answer}")
    print(f"{len(probes)} probes over {compactions} compactions")
    return EXIT_OK


def _no_compaction(session: str) -> str:
    return f"session {session} made no compaction: nothing left its context, nothing to ask"


async def _evaluate(
    args: argparse.Namespace, workdir: str, session: str, base_url: str | None, name: str
) -> int:
    from .._secrets import masked_url
    from ..agent import OpenAIChatModel
    from ..eval import evaluate
    from ..exceptions import ConfigError, ModelError

    shown_model = masked_url(args.model)
    try:
        model = OpenAIChatModel(
            name,
            base_url=base_url,
            api_key=os.environ.get(args.key_env) or None,
            context_window=128_000,  # not used: nothing is compressed here
            temperature=0.0,
            timeout=args.timeout,
            max_retries=0,  # every request counts against the calls announced
        )
    except (ConfigError, ImportError) as exc:
        raise CliError(masked_url(args.model, f"--model {shown_model}: {exc}")) from None

    strategies = _COMPARED if args.strategies else ("summary",)

    def planned(plan: Any) -> None:
        if plan.probes == 0 or plan.strategy != strategies[0]:
            return
        most = plan.most_calls * len(strategies)
        stop = f"; stops before {plan.max_calls} (--max-calls)" if most > plan.max_calls else ""
        times = f" under {len(strategies)} strategies" if len(strategies) > 1 else ""
        print(
            f"ctxoffload eval: {plan.probes} probes over {plan.compactions} compactions{times}: "
            f"at most {most} model calls to {shown_model}{stop}",
            file=sys.stderr,
            flush=True,
        )

    def progress(done: int, total: int, probe: Any) -> None:
        print(
            f"ctxoffload eval: {done}/{total} compaction {probe.compaction} {probe.category}",
            file=sys.stderr,
            flush=True,
        )

    reports: list[Any] = []
    try:
        async with model:
            for strategy in strategies:
                used = sum(r.calls for r in reports)
                if reports and used >= args.max_calls:
                    break
                reports.append(
                    await evaluate(
                        workdir,
                        session,
                        model,
                        max_calls=args.max_calls - used,
                        strategy=strategy,
                        on_plan=planned,
                        on_progress=progress,
                    )
                )
    except ModelError as exc:
        raise CliError(
            masked_url(args.model, f"a call to {shown_model} failed, the run stopped: {exc}"),
            code=1,
        ) from None
    report = reports[0]
    if args.strategies:
        return _print_strategies(session, reports, as_json=args.json)
    if args.json:
        print(json_text({"session": session, **report.as_dict()}))
        return EXIT_OK
    if report.plan.compactions == 0:
        print(_no_compaction(session))
        return EXIT_OK
    print(_text(report))
    return EXIT_OK


def _share(count: int, asked: int) -> str:
    return f"{count}/{asked} ({100 * count // asked}%)" if asked else "-"


def _text(report: Any) -> str:
    plan = report.plan
    lines = [
        f"session {plan.session}: {plan.compactions} compactions, {len(report.results)} "
        f"probes asked, {report.calls} model calls; read-back tools: {', '.join(plan.tools)}"
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
            group = f"{label} {row['group']}".strip()
            rows.append(
                (
                    group,
                    str(row["asked"]),
                    _share(row["no_tools"], row["asked"]),
                    _share(row["one_read"], row["asked"]),
                    _share(row["not_at_all"], row["asked"]),
                    f"{row['tokens_no_tools']:,}/{row['tokens_one_read']:,}",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    if not report.results:
        lines.append("no probe: nothing that left the context is missing from what came after")
    return "\n".join(lines)


def _print_strategies(session: str, reports: list[Any], *, as_json: bool) -> int:
    """The strategies side by side, best first: most answered with one read, then with no
    tools, then fewest tokens."""

    def total(report: Any) -> dict[str, Any]:
        rows = report.table(lambda p: "all")
        return (
            rows[0]
            if rows
            else {
                "asked": 0,
                "no_tools": 0,
                "one_read": 0,
                "not_at_all": 0,
                "tokens_no_tools": 0,
                "tokens_one_read": 0,
            }
        )

    ranked = sorted(
        reports,
        key=lambda r: (
            -total(r)["one_read"],
            -total(r)["no_tools"],
            total(r)["tokens_no_tools"] + total(r)["tokens_one_read"],
        ),
    )
    if as_json:
        print(
            json_text(
                {
                    "session": session,
                    "ranking": [r.plan.strategy for r in ranked],
                    "strategies": [{"strategy": r.plan.strategy, **r.as_dict()} for r in reports],
                }
            )
        )
        return EXIT_OK
    if not reports or reports[0].plan.compactions == 0:
        print(_no_compaction(session))
        return EXIT_OK
    header = ("strategy", "asked", "no tools", "one read", "not at all", "tokens")
    rows = [header]
    for report in ranked:
        sums = total(report)
        rows.append(
            (
                report.plan.strategy,
                str(sums["asked"]),
                _share(sums["no_tools"], sums["asked"]),
                _share(sums["one_read"], sums["asked"]),
                _share(sums["not_at_all"], sums["asked"]),
                f"{sums['tokens_no_tools'] + sums['tokens_one_read']:,}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"session {session}: the same probes after what each strategy sends, best first")
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        print("  ".join(cells).rstrip())
    return EXIT_OK
