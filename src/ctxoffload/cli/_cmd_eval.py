"""`ctxoffload eval SESSION --model URL/NAME` (or a TRANSCRIPT file, replayed first): what a
model still knows after each compaction of a session, with no tools and with one read, under
the strategies asked for (`ctxoffload.eval.evaluate`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .._disk.wording import plural
from ..exceptions import CliError
from ._access import open_workspace, session_folder
from ._arguments import Workdir, add_workdir
from ._commands import COMMAND_HELP
from ._eval_report import Unit, print_probes, print_reports
from ._output import Progress
from ._session_name import SessionName

__all__ = ["model_endpoint", "register", "run"]

_MAX_CALLS = 200
_TIMEOUT = 60.0
DEFAULT_WINDOW = 32_000
SESSION_STRATEGIES = ("summary", "clearing", "window", "langchain")
"""What `--strategies` offers for a session, in this order (`evaluate`'s `strategy`)."""
TRANSCRIPT_STRATEGIES = ("written", "extractive", "clearing", "window", "langchain")
"""What `--strategies` offers for a transcript: `written` and `extractive` are ctxoffload's
compactions of a replay with the model's summaries or the extractive ones; the other three
are built on the extractive replay's record."""
_INTERNAL = {"written": "summary", "extractive": "summary"}


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
            "graded by exact match; the task, decisions and the state at the cut by a judge "
            "model (--judge) or by their key terms. A transcript file is replayed into a "
            "temporary workspace first. The number of model calls is printed before the "
            "first one."
        ),
    )
    parser.add_argument(
        "target",
        metavar="SESSION|TRANSCRIPT",
        help="a session of the workspace, or a transcript file (any format `replay` reads)",
    )
    parser.add_argument(
        "--model",
        metavar="URL/NAME",
        help="the model: an OpenAI-compatible base URL and the model's name "
        "(http://127.0.0.1:8000/v1/qwen2.5-7b), or a name for OpenAI's API (gpt-4o-mini)",
    )
    parser.add_argument(
        "--judge",
        metavar="URL/NAME",
        help="grade the open probes (task, decision, state) with this model and a rubric, "
        "its verdicts kept (the same form as --model); default: by their key terms",
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
        "--price",
        type=float,
        metavar="USD",
        help="the model's price per million prompt tokens, to print a cost estimate with "
        "the call count",
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
        nargs="?",
        const="all",
        metavar="LIST",
        help="ask the same probes under each strategy, comma-separated, and rank them side "
        "by side: for a session summary (as recorded), clearing, window, langchain; for a "
        "transcript written (ctxoffload, --model's summaries), extractive, clearing, "
        "window, langchain; alone: all of them",
    )
    parser.add_argument(
        "--window",
        type=int,
        metavar="N",
        help=f"a transcript's context window in tokens (default: {DEFAULT_WINDOW:,})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workdir(parser)
    parser.set_defaults(run=run)


def model_endpoint(text: str, option: str = "--model") -> tuple[str | None, str]:
    """`--model`'s (or `--judge`'s) value as (base URL or None for OpenAI's, model name).

    A URL is split after its `/v1/` when it has one (the name may hold a `/`:
    `http://host/v1/meta-llama/Llama-3`), else at its last `/`.

    Raises:
        CliError: a URL with no model name after it.
    """
    from .._secrets import masked_url

    if not text.startswith(("http://", "https://")):
        if not text.strip():
            raise CliError(f"{option} is empty: pass URL/NAME or a model name")
        return None, text
    at = text.rfind("/v1/")
    base, name = (text[: at + 3], text[at + 4 :]) if at >= 0 else text.rsplit("/", 1)
    if not name or base.endswith(("http:/", "https:/")):
        raise CliError(
            f"{option} {masked_url(text)!r} names no model: pass the base URL and the model's "
            "name, http://127.0.0.1:8000/v1/NAME"
        )
    return base, name


def _transcript(target: str) -> Path | None:
    """The transcript file `target` names, or None for a session name.

    Raises:
        CliError: it reads as a path (a `/`, a .json or .jsonl ending) but names no file.
    """
    if os.path.isfile(target):
        return Path(target)
    if "/" in target or os.sep in target or target.endswith((".json", ".jsonl")):
        raise CliError(f"{target!r} is neither a session name nor a transcript file")
    return None


def _strategies(value: str | None, transcript: bool) -> list[str]:
    offered = TRANSCRIPT_STRATEGIES if transcript else SESSION_STRATEGIES
    if value is None:
        return [offered[1] if transcript else offered[0]]
    if value == "all":
        return list(offered)
    chosen = [name.strip() for name in value.split(",") if name.strip()]
    wrong = [name for name in chosen if name not in offered]
    if wrong or not chosen:
        what = "a transcript" if transcript else "a session"
        raise CliError(f"--strategies {value!r}: for {what}, choose among {', '.join(offered)}")
    return list(dict.fromkeys(chosen))


def _chat_model(args: argparse.Namespace, text: str, option: str) -> Any:
    """An `OpenAIChatModel` for `--model`/`--judge`'s URL/NAME (nothing is sent yet)."""
    from .._secrets import masked_url
    from ..agent import OpenAIChatModel
    from ..exceptions import ConfigError

    base_url, name = model_endpoint(text, option)
    try:
        return OpenAIChatModel(
            name,
            base_url=base_url,
            api_key=os.environ.get(args.key_env) or None,
            context_window=128_000,  # not used: nothing is compressed with it
            temperature=0.0,
            timeout=args.timeout,
            max_retries=0,  # every request counts against the calls announced
        )
    except (ConfigError, ImportError) as exc:
        raise CliError(masked_url(text, f"{option} {masked_url(text)}: {exc}")) from None


def run(args: argparse.Namespace) -> int:
    """Run `ctxoffload eval`; returns the exit status (0 done, 1 a model call failed,
    2 bad input)."""
    if args.max_calls < 1:
        raise CliError(f"--max-calls {args.max_calls} is not a positive number of calls")
    if not args.timeout > 0:
        raise CliError(f"--timeout {args.timeout} is not a positive number of seconds")
    if args.price is not None and not args.price >= 0:
        raise CliError(f"--price {args.price} is not a price in dollars")
    transcript = _transcript(args.target)
    strategies = _strategies(args.strategies, transcript is not None)
    model = judge = None
    if not args.probes:
        if args.model is None:
            raise CliError("eval needs --model URL/NAME (or --probes to list the probes only)")
        model = _chat_model(args, args.model, "--model")
        if args.judge is not None:
            judge = _chat_model(args, args.judge, "--judge")
    elif "written" in strategies and args.model is None and args.strategies not in (None, "all"):
        raise CliError("--strategies written needs --model: it writes the summaries")
    if transcript is None:
        where = Workdir.of(args)
        session = SessionName(args.target)
        workdir = open_workspace(where, session=session)
        session_folder(workdir, session)
        references = None
        if where.is_bucket:  # read through a local copy: its URL names files of the copy
            references = {where.copies.display(workdir): workdir}
        units = [Unit(s, s, workdir, session) for s in strategies]
        return asyncio.run(_run(args, units, model, judge, references, None, strategies))
    from ._transcripts import load_transcript

    _, runs = load_transcript(transcript)
    with tempfile.TemporaryDirectory(prefix="ctxoffload-eval-") as folder:
        workdir = str(Path(folder) / "extractive")
        sessions = asyncio.run(_replay(runs, workdir, args.window, None))
        units = [
            Unit(label, _INTERNAL.get(label, label), workdir, session)
            for label in strategies
            if label != "written"
            for session in sessions
        ]
        written = None
        if "written" in strategies and model is not None:
            written = (runs, str(Path(folder) / "written"))
        return asyncio.run(_run(args, units, model, judge, None, written, strategies))


async def _replay(
    runs: list[Any], workdir: str, window: int | None, summary_model: Any
) -> list[str]:
    """Replay each run of a transcript into a new workspace at `workdir` (`replay`'s default
    config, `window` tokens), one session each; returns their names."""
    from ..compression import ContextConfig
    from ..tokens import get_token_counter
    from ..workspace import LocalWorkspace
    from ._replaying import replay_run

    if window is not None and window < 1:
        raise CliError(f"--window {window} is below 1: give the window in tokens")
    config = ContextConfig(context_window=window or DEFAULT_WINDOW)
    workspace = LocalWorkspace(workdir, fsync=False)
    await workspace.initialize()
    sessions = []
    for number, one in enumerate(runs, start=1):
        session = "t" if len(runs) == 1 else f"t-r{number}"
        await replay_run(
            one.messages,
            config,
            workspace,
            session,
            run_name=one.name,
            config_name="default",
            counter=get_token_counter(),
            summary_model=summary_model,
        )
        sessions.append(session)
    return sessions


class _Budget:
    """The model under evaluation as the written replay's summary model, its calls counted
    against --max-calls: past it, a call fails and the compressor writes that summary
    extractively instead."""

    def __init__(self, model: Any, left: int) -> None:
        self.model = model
        self.model_name = model.model_name
        self.context_window = model.context_window
        self.left = left
        self.calls = 0

    async def generate(self, messages: Any, **options: Any) -> Any:
        from ..exceptions import ModelError

        if self.calls >= self.left:
            raise ModelError("--max-calls reached: no more summaries are written")
        self.calls += 1
        return await self.model.generate(messages, **options)


async def _run(
    args: argparse.Namespace,
    units: list[Unit],
    model: Any,
    judge: Any,
    references: dict[str, str] | None,
    written: tuple[list[Any], str] | None,
    strategies: list[str],
) -> int:
    from .._secrets import masked_url
    from ..eval import evaluate
    from ..exceptions import ModelError

    # The plan: every unit planned without a model; nothing is sent before it is said.
    for unit in units:
        unit.report = await evaluate(
            unit.workdir, unit.session, None, strategy=unit.strategy, judge=judge,
            references=references,
        )  # fmt: skip
    if args.probes:
        return print_probes(units, as_json=args.json)
    shown_model = masked_url(args.model)
    _say_plan(args, units, written, shown_model)
    used = 0
    label = ""

    def progress(done: int, total: int, probe: Any) -> None:
        where = f"{label}, " if len(strategies) > 1 else ""
        note = f"({where}compaction {probe.compaction}, {probe.category})"
        if bar.enabled:  # a terminal: one line, drawn again in place
            bar.advance(1, note)
        elif done == total or 10 * done // total > 10 * (done - 1) // total:
            # A pipe or a log: a line at each tenth of a strategy's probes.
            print(f"ctxoffload eval: {done}/{total} probes {note}", file=sys.stderr, flush=True)

    try:
        async with contextlib.AsyncExitStack() as stack:
            bar = stack.enter_context(Progress("ctxoffload eval: probes", _probes(units)))
            await stack.enter_async_context(model)
            if judge is not None:
                await stack.enter_async_context(judge)
            if written is not None:
                runs, workdir = written
                budget = _Budget(model, args.max_calls)
                sessions = await _replay(runs, workdir, args.window, budget)
                used += budget.calls
                units = [Unit("written", "summary", workdir, s) for s in sessions] + units
                units.sort(key=lambda u: strategies.index(u.label))
                bar.total = None  # the written replay's probes are known once each is planned
            for unit in units:
                label = unit.label
                unit.report = await evaluate(
                    unit.workdir,
                    unit.session,
                    model if used < args.max_calls else None,
                    max_calls=max(1, args.max_calls - used),
                    strategy=unit.strategy,
                    judge=judge,
                    references=references,
                    on_progress=progress,
                )
                used += unit.report.calls
    except ModelError as exc:
        raise CliError(
            masked_url(args.model, f"a call to {shown_model} failed, the run stopped: {exc}"),
            code=1,
        ) from None
    return print_reports(units, strategies, args.target, used, as_json=args.json)


def _probes(units: list[Unit]) -> int:
    """The probes the units' plans ask."""
    return sum(u.report.plan.probes for u in units)


def _say_plan(args: argparse.Namespace, units: list[Unit], written: Any, shown_model: str) -> None:
    """Say on stderr, before any call, how many calls the run makes at most and about how
    many prompt tokens they send."""
    from .._secrets import masked_url

    plans = [u.report.plan for u in units]
    first = [u.report.plan for u in units if u.label == units[0].label] if units else []
    most = sum(p.most_calls for p in plans)
    tokens = 3 * sum(p.context_tokens for p in plans)
    extra = ""
    if written is not None:
        # The written replay's summaries and probes are known only once it ran: the
        # extractive replay's are the estimate.
        base = [u for u in units if u.label == "extractive"] or [
            u for u in units if u.strategy == "summary"
        ]
        summaries = sum(u.report.plan.compactions for u in base)
        asked = sum(u.report.plan.most_calls for u in base)
        most += summaries + asked
        tokens += 3 * sum(u.report.plan.context_tokens for u in base)
        extra = f", about {summaries} of them summaries for the written replay"
    if not any(p.probes for p in plans) and written is None:
        return
    labels = sorted({u.label for u in units} | ({"written"} if written else set()))
    times = f" under {len(labels)} strategies" if len(labels) > 1 else ""
    probes, compactions = sum(p.probes for p in first), sum(p.compactions for p in first)
    cost = ""
    if args.price is not None:
        cost = f", about ${tokens / 1e6 * args.price:,.2f} at ${args.price:g} per million"
    stop = f"; stops before {args.max_calls} (--max-calls)" if most > args.max_calls else ""
    judge = f", the judge's included ({masked_url(args.judge)})" if args.judge else ""
    print(
        f"ctxoffload eval: {plural(probes, 'probe')} over "
        f"{plural(compactions, 'compaction')}{times}: at most "
        f"{most} model calls to {shown_model}{extra}{judge}, about {tokens:,} prompt "
        f"tokens{cost}{stop}",
        file=sys.stderr,
        flush=True,
    )
