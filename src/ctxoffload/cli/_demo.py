"""`ctxoffload demo`: the whole thing, offline.

A `ScriptedModel` plays an agent investigating a failed nightly job. Its tools return what
real tools return: a directory listing, a 2 MB log, a large JSON API response, a dashboard
screenshot. With a small context window, results are truncated into the workspace and the
history is compressed at least twice; at the end the agent finds the failing order by
grepping a log file that left its context long before.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import random
import re
import stat
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    MARK,
    SESSIONS_DIR,
    STATE_FILE,
    TOOL_RESULT_PREFIX,
    TOOL_RESULT_SUFFIX,
    tool_result_name,
)
from .._disk.read import Folder
from ..agent import Agent, workspace_tools
from ..compression import ContextConfig
from ..messages import Base64Source, DataBlock, Msg, TextBlock, ToolCallBlock
from ..model import ScriptedModel
from ..tokens import TokenCounter, get_token_counter
from ..workspace import LocalWorkspace

__all__ = ["DemoReport", "describe_config", "format_report", "run_demo"]

FAILED_ORDER = "ORD-58213"
ERROR_MESSAGE = (
    f"ERROR export-worker-7 order_id={FAILED_ORDER} batch=2211 payment export failed: "
    "disk quota exceeded on /mnt/exports (10.0 GiB of 10.0 GiB used)"
)

# The demo's model: a window small enough that a handful of tool calls fill it; triggered at
# 0.7, its twelve steps compress four times at any path length (tests/cli/test_demo.py).
DEMO_CONFIG = ContextConfig(
    context_window=4_000, trigger_ratio=0.7, reserve_ratio=0.15, tool_result_limit=600
)


# -- the tools --------------------------------------------------------------------------


def _log_text(date: str, *, lines: int = 24_000, with_error: bool = True) -> str:
    rng = random.Random(date)
    workers = [f"export-worker-{i}" for i in range(1, 9)]
    out: list[str] = []
    error_at = lines * 7 // 10
    for i in range(lines):
        second = 3 * 3600 + i * 3600 // lines
        stamp = f"{date}T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        if with_error and i == error_at:
            out.append(f"{stamp}.118Z {ERROR_MESSAGE}")
            continue
        order = f"ORD-{rng.randrange(10_000, 99_999)}"
        if rng.random() < 0.01:
            level, msg = (
                "WARN",
                f"retrying upload of {order}: slow response from storage (2.{i % 9}s)",
            )
        else:
            rows, size = rng.randrange(1, 400), rng.randrange(10**4, 10**6)
            level, msg = "INFO", f"exported {order} rows={rows} bytes={size}"
        out.append(f"{stamp}.{i % 1000:03d}Z {level} {rng.choice(workers)} {msg}")
    return "\n".join(out)


def list_directory(path: str) -> str:
    """List a directory on the job server.

    Args:
        path: the directory to list.
    """
    rng = random.Random(path)
    rows = [f"total {300}", f"listing of {path}"]
    for day in range(1, 31):
        for kind in ("export", "import", "report", "audit", "cleanup", "reindex", "billing"):
            size = rng.randrange(10**5, 10**8)
            rows.append(
                f"-rw-r--r-- 1 jobs jobs {size:>10} 2026-11-{day:02d} {kind}-2026-11-{day:02d}.log"
            )
    return "\n".join(rows)


def fetch_logs(job: str, date: str) -> str:
    """Fetch one night's log of a job.

    Args:
        job: the job name, e.g. nightly-export.
        date: the night, as YYYY-MM-DD.
    """
    return _log_text(date, with_error=date == "2026-11-20")


def query_api(endpoint: str) -> str:
    """Call the orders API and return its JSON response.

    Args:
        endpoint: the path and query, e.g. /v1/orders?status=failed.
    """
    rng = random.Random(endpoint)
    if "quotas" in endpoint:
        body: Any = {
            "volumes": [
                {"mount": f"/mnt/vol{i}", "used_gib": round(rng.uniform(1, 9), 1), "quota_gib": 10}
                for i in range(120)
            ]
            + [{"mount": "/mnt/exports", "used_gib": 10.0, "quota_gib": 10, "full": True}]
        }
    else:
        body = {
            "endpoint": endpoint,
            "orders": [
                {
                    "id": f"ORD-{rng.randrange(10_000, 99_999)}",
                    "status": "failed" if i % 50 == 0 else "exported",
                    "customer": f"cust-{rng.randrange(1000, 9999)}",
                    "amount_cents": rng.randrange(100, 100_000),
                    "items": [
                        {"sku": f"SKU-{rng.randrange(100, 999)}", "qty": rng.randrange(1, 5)}
                        for _ in range(3)
                    ],
                }
                for i in range(600)
            ],
        }
    return json.dumps(body, indent=2)


def _png(width: int = 96, height: int = 48) -> bytes:
    """A real PNG: a storage-usage bar that is full."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(
        b"\x00"
        + b"".join(
            bytes((220, 40, 40)) if 8 <= y < height - 8 else bytes((240, 240, 240))
            for _x in range(width)
        )
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def capture_dashboard(panel: str) -> list[TextBlock | DataBlock]:
    """Take a screenshot of a monitoring dashboard panel.

    Args:
        panel: the panel name, e.g. storage.
    """
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(_png()).decode()),
        name=f"{panel}-panel.png",
    )
    return [TextBlock(text=f"Screenshot of the {panel} panel at 2026-11-20T03:20Z:"), image]


# -- the script -----------------------------------------------------------------------------


def _call(step: int, name: str, thought: str, **args: Any) -> Msg:
    return Msg(
        role="assistant",
        content=[TextBlock(text=thought), ToolCallBlock(id=f"call_{step}", name=name, input=args)],
    )


# The name of a tool_result file, as a pattern.
_TOOL_RESULT = rf"{re.escape(TOOL_RESULT_PREFIX)}[\w.-]+{re.escape(TOOL_RESULT_SUFFIX)}"
# The file that holds the 2026-11-20 log: the result of the second call.
_LOG_FILE = tool_result_name("call_2")


def _find_log_reference(messages: Sequence[Msg]) -> str:
    """The path of the offloaded 2026-11-20 log, found the way an agent would: in its context."""
    named = re.compile(rf"(\S*{re.escape(_LOG_FILE)})")
    # A long workspace path leaves room in the summary for the newest files only; it still
    # names the session folder (its context.jsonl), where the log is the file of call 2, as
    # a search of that context.jsonl for the 2026-11-20 call would tell an agent.
    folder = re.compile(rf"(\S*/)(?:{re.escape(CONTEXT_FILE)}|{_TOOL_RESULT})")
    found_folder: str | None = None
    for msg in messages:
        texts = [msg.text] + [r.output for r in msg.tool_results if isinstance(r.output, str)]
        for text in texts:
            match = named.search(text)
            if match:
                return match.group(1).strip("'\"(),")
            match = folder.search(text)
            if match and found_folder is None:
                found_folder = match.group(1).strip("'\"(),")
    if found_folder is not None:
        return found_folder + _LOG_FILE
    raise LookupError("the log file is named nowhere in the context")


def _answer(messages: Sequence[Msg]) -> Msg:
    outputs = "\n".join(
        r.output for m in messages for r in m.tool_results if isinstance(r.output, str)
    )
    match = re.search(r"ERROR .*?order_id=(\S+).*?failed: (.*)$", outputs, flags=re.MULTILINE)
    if not match:
        return Msg(role="assistant", content="I could not find the failing line in the log.")
    order, reason = match.groups()
    return Msg(
        role="assistant",
        content=(
            f"The nightly export failed on order {order}: {reason.strip()}. The /mnt/exports "
            "volume hit its 10 GiB quota (the storage panel and the quotas API agree). Free "
            "space or raise the quota, then re-run batch 2211."
        ),
    )


def _read_around_match(messages: Sequence[Msg]) -> Msg:
    """Read a few lines around the Grep match, as an agent checking context would."""
    reference = _find_log_reference(messages)
    grep_output = _last_tool_output(messages)
    match = re.search(r":(\d+):.*ERROR", grep_output)
    line = int(match.group(1)) if match else 1
    return _call(
        11,
        "Read",
        "Look at the lines around the error.",
        path=reference,
        offset=max(1, line - 2),
        limit=5,
    )


def _last_tool_output(messages: Sequence[Msg]) -> str:
    for msg in reversed(messages):
        for result in msg.tool_results:
            if isinstance(result.output, str):
                return result.output
    return ""


def demo_script() -> list[Any]:
    """The scripted model's steps."""
    logs = "nightly-export"
    return [
        _call(1, "list_directory", "First, what ran last night?", path="/srv/jobs/nightly"),
        _call(2, "fetch_logs", "The export log of the failed night.", job=logs, date="2026-11-20"),
        _call(3, "query_api", "Which orders failed?", endpoint="/v1/orders?status=failed"),
        _call(4, "capture_dashboard", "Check storage on the dashboard.", panel="storage"),
        _call(5, "fetch_logs", "Compare with the night before.", job=logs, date="2026-11-19"),
        _call(6, "query_api", "Check the volume quotas.", endpoint="/v1/storage/quotas"),
        _call(7, "list_directory", "What is filling the exports volume?", path="/mnt/exports"),
        _call(
            8, "fetch_logs", "Did the retry job fail too?", job=logs + "-retry", date="2026-11-21"
        ),
        _call(9, "query_api", "Which batches were exported?", endpoint="/v1/exports/batches"),
        lambda messages: _call(
            10,
            "Grep",
            "The failing line is in the 2026-11-20 log, which left my context: grep it.",
            pattern="ERROR",
            path_or_glob=_find_log_reference(messages),
        ),
        _read_around_match,
        _answer,
    ]


def scripted_summary(messages: Sequence[Msg]) -> dict[str, str]:
    """The demo's summary model: a deterministic stand-in that reads the transcript it is sent.

    A real deployment passes a (cheap) chat model as `summary_model=`; this one keeps the
    demo offline while exercising the same structured-output path.
    """
    prompt = messages[-1].text
    calls = re.findall(r"\[calls tool (\w+) \(id (\w+)\) with (\{.*?\})\]", prompt)
    files = sorted(set(re.findall(rf"([^\s'\"(=,]+{_TOOL_RESULT})", prompt)))
    earlier = re.search(r'"important_discoveries": "(.*?)"', prompt)
    done = "; ".join(f"{name} {args}" for name, _id, args in calls) or "no tool calls"
    return {
        "task_overview": "Find out why the nightly export job failed last night and which order "
        "caused it.",
        "current_state": f"Tools called so far in the compressed part: {done}.",
        # Folds in the earlier summary's discoveries without repeating one already there.
        "important_discoveries": _fold(
            earlier.group(1) if earlier else "",
            "Logs and API responses were too large for the context and were saved to files; "
            "the failing line has not been located in the context yet.",
        ),
        "next_steps": "Search the saved 2026-11-20 log for ERROR lines to find the failing order.",
        "context_to_preserve": "Saved tool outputs: " + (", ".join(files) or "none"),
    }


def _fold(earlier: str, new: str) -> str:
    return earlier if new in earlier else f"{earlier} {new}".strip()


# -- running and reporting --------------------------------------------------------------


@dataclass
class DemoReport:
    """What the demo did, for the printed report and for tests."""

    workdir: Path
    session_id: str
    answer: str
    steps: list[tuple[int, str, int, int, bool]] = field(default_factory=list)
    compressions: int = 0
    truncations: int = 0
    summary_text: str = ""
    files: list[tuple[str, int]] = field(default_factory=list)
    tools: int = 0  # tool schemas sent with every model call
    tools_tokens: int = 0  # what they cost, on top of the messages


class _FullCount:
    """Tokens the context would hold without ctxoffload (nothing truncated or compressed)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.total = 3  # the reply priming that count_messages adds

    def add(self, msg: Msg) -> None:
        self.total += self.counter.count_message(msg)


async def run_demo(
    workdir: Path,
    *,
    session_id: str = "nightly-job",
    on_step: Callable[[int, int], None] | None = None,
) -> DemoReport:
    """Run the demo into `workdir` and return what happened.

    Args:
        workdir: the workspace folder.
        session_id: the session to write.
        on_step: called with (model calls so far, model calls in the script) before each one.
    """
    script = demo_script()
    workspace = LocalWorkspace(workdir)
    await workspace.initialize()
    counter = get_token_counter()
    full = _FullCount(counter)
    seen: list[tuple[int, int]] = []  # (tokens sent, tokens without ctxoffload) per model call

    def timed(step: Any) -> Any:
        async def play(messages: Sequence[Msg]) -> Msg:
            seen.append((counter.count_messages(messages), full.total))
            if on_step is not None:
                on_step(len(seen), len(script))
            reply: Msg = step(messages) if callable(step) else step
            full.add(reply)
            return reply

        return play

    def counted(tool: Any) -> Any:
        # functools.wraps keeps the name, docstring and signature the schema is built from,
        # and the reader mark (copied, and reachable through __wrapped__).
        @functools.wraps(tool)
        async def wrapper(**kwargs: Any) -> Any:
            result = await tool(**kwargs) if _is_async(tool) else tool(**kwargs)
            if isinstance(result, str):
                full.add(Msg(role="tool", content=result))
            else:
                full.add(Msg(role="tool", content=list(result)))
            return result

        return wrapper

    model = ScriptedModel([timed(s) for s in script], model_name="gpt-4o-mini")
    model.context_window = DEMO_CONFIG.context_window or 4_000
    # Read/Grep output capped well under the tool-result limit, so reading an offloaded file
    # never gets offloaded again.
    file_tools = workspace_tools(workspace, max_output_chars=1_600, max_line_chars=400)
    summarizer = ScriptedModel(default=scripted_summary, model_name="gpt-4o-mini")
    agent = Agent(
        name="analyst",
        system_prompt=(
            "You are an on-call analyst. Investigate failures with your tools. Large tool "
            "results are saved to files in your workspace; read them back with Read and Grep."
        ),
        model=model,
        tools=[
            counted(list_directory),
            counted(fetch_logs),
            counted(query_api),
            counted(capture_dashboard),
            *[counted(t) for t in file_tools],
        ],
        offloader=workspace,
        context_config=DEMO_CONFIG,
        session_id=session_id,
        counter=counter,
        summary_model=summarizer,
    )
    for msg in agent.messages:
        full.add(msg)
    question = "Find out why the nightly export job failed last night, and which order caused it."
    full.add(Msg(role="user", content=question))
    # Closed as every example closes its agent: the lease is released, so gc and a later run
    # see the session as free, not held by a process that is gone.
    async with agent:
        reply = await agent.reply(question)

    report = DemoReport(workdir=workdir, session_id=agent.session_id, answer=reply.text)
    report.tools = len(agent.tool_schemas)
    report.tools_tokens = counter.count_tools(agent.tool_schemas)
    for record, (sent, without) in zip(agent.steps, seen, strict=False):
        tools = ", ".join(record.tool_calls) or "(final answer)"
        report.steps.append((record.step, tools, sent, without, record.compressed))
    report.compressions = agent.compressor.compressions
    report.truncations = sum(r.truncated for r in agent.steps)
    summary = next((m for m in agent.messages if m.metadata.get(MARK)), None)
    report.summary_text = summary.text if summary is not None else ""
    report.files = _files_written(workdir, agent.session_id)
    return report


def _files_written(workdir: Path, session_id: str) -> list[tuple[str, int]]:
    """The files of data/ and of the session's folder, with their sizes, read through the
    workspace's reader (no link followed)."""
    files: list[tuple[str, int]] = []
    for parts in ((DATA_DIR,), (SESSIONS_DIR, session_id)):
        try:
            with Folder(str(workdir), *parts) as folder:
                for name in folder.names():
                    st = folder.stat(name)
                    if stat.S_ISREG(st.st_mode):
                        files.append(("/".join((*parts, name)), st.st_size))
        except FileNotFoundError:
            continue  # nothing was stored in data/
    return files


def _is_async(func: Any) -> bool:
    return inspect.iscoroutinefunction(func)


def describe_config(config: ContextConfig) -> str:
    """One line naming the window and the thresholds the demo runs with."""
    window = config.context_window or 0
    return (
        f"window {window:,} tokens; compression triggers above {config.trigger_ratio:g} x window "
        f"= {int(config.trigger_ratio * window):,} tokens and keeps "
        f"{int(config.reserve_ratio * window):,} ({config.reserve_ratio:g}); tool results over "
        f"{config.tool_result_limit:,} tokens go to files"
    )


def format_report(report: DemoReport) -> str:
    """The report the demo prints."""
    out: list[str] = []
    out.append(f"ctxoffload demo: session {report.session_id!r} in {report.workdir}")
    out.append(describe_config(DEMO_CONFIG))
    out.append("")
    out.append(f"{'step':>4}  {'tool calls':<22} {'context tokens':>15} {'without ctxoffload':>19}")
    for step, tools, sent, without, compressed in report.steps:
        note = "  <- compressed" if compressed else ""
        out.append(f"{step:>4}  {tools:<22} {sent:>15,} {without:>19,}{note}")
    if report.tools:
        out.append(
            f"(tokens of the messages sent; the {report.tools} tool schemas add "
            f"{report.tools_tokens:,} to every call, and count against the window: "
            "`ctxoffload show` counts both)"
        )
    out.append("")
    out.append(
        f"{report.truncations} tool results truncated into files, "
        f"{report.compressions} compressions of older history."
    )
    out.append("")
    out.append(f"Files written under {report.workdir}:")
    for name, size in report.files:
        out.append(f"  {name:<84} {size:>10,} bytes")
    out.append("")
    out.append("Last summary in the context:")
    out.extend("  " + line for line in report.summary_text.splitlines())
    out.append("")
    out.append(f"Answer: {report.answer}")
    out.append("")
    session = report.workdir / SESSIONS_DIR / report.session_id
    out.append("Inspect the session:")
    out.append(f"  ls -l {session}")
    out.append(f"  grep -n ERROR {session}/{TOOL_RESULT_PREFIX}*{TOOL_RESULT_SUFFIX}")
    out.append(f"  cat {session}/{EVENTS_FILE}")
    out.append(f"  python -m json.tool {session}/{STATE_FILE} | head -50")
    out.append("or with the ctxoffload command:")
    out.append(f"  ctxoffload --workdir {report.workdir} ls")
    out.append(f"  ctxoffload --workdir {report.workdir} grep ERROR {report.session_id}")
    out.append(f"  ctxoffload --workdir {report.workdir} stats")
    return "\n".join(out)
