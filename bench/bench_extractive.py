"""Measure the extractive summary on the transcript corpus: what the model continues from
when no summary model writes the summary.

Every corpus run (13 runs in 11 files, `../shared/corpus`) is replayed through a
`Compressor` with no summary model, at 8,000 and at 32,000 tokens, as `ctxoffload replay`
feeds it (each message processed as it arrives, the context compressed before each model
call). At each compaction it reads the messages that left and the summary, and counts:

- task: the compactions whose summary's `task_overview` holds the task's first sentence
  (`TASKS`, written down by hand from each transcript; whitespace and case folded), and
  those whose summary message, as rendered into the context, still shows it; a compaction
  whose task never left (the latest request stays in the context verbatim) counts as
  holding it, and is counted apart too ("pinned");
- errors: the distinct error and failure lines of the tool output that left (`error_lines`:
  an unindented line with `Error:`, `Exception:`, `ERROR`, `FAIL`, `error:`, `fatal:`,
  `panic:`, `command not found`, `No such file or directory` or `Segmentation fault`),
  and how many of them the summary or the artifact index names (their first 60
  characters, whitespace folded);
- none: the fields that say nothing ("none", empty, "Not stated ...") while what left
  holds something for them (a request, an assistant message, an error line, a command).

With `--compare REF` (default `lead`), the same measures are taken on the code of the git
ref REF too (its `src/` exported to a temporary folder and run in a child process), and
printed beside these.

Run: `python bench/bench_extractive.py [--compare REF | --no-compare] [--json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.cli._transcripts import load_transcript
from ctxoffload.compression import Compressor, is_summary_message
from ctxoffload.compression._notes import is_context_note
from ctxoffload.messages import Msg, TextBlock
from ctxoffload.tokens import get_token_counter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
WINDOWS = (8_000, 32_000)
VERBOSE = bool(os.environ.get("BENCH_VERBOSE"))  # each compaction's misses, on stderr

TASKS = {
    "claudecode-agentcmd-full-session-two": "please move the + button to it's own button to "
    "the right of the search in @apps/app/src/client/components/AppInnerSidebar.tsx",
    "claudecode-demo-todoapp-fe5e1c67": "create TODO app by Next.js",
    "codex-rollout-2025-09-24T19-22-20-01997e76": "Updating a team to assign a lead or change "
    "from viewer to contributor is VERY slow.",
    "codex-rollout-2025-09-25T09-49-46-01998190": "I want to migrate this app from "
    "@supabase/supabase-js to prisma.",
    "minisweagent-django__django-15629": "Errors with db_collation – no propagation to foreignkeys",
    "minisweagent-psf__requests-1142": "requests.get is ALWAYS sending content length",
    "minisweagent-pylint-dev__pylint-6528": "Pylint does not respect ignores in "
    "`--recursive=y` mode",
    "minisweagent-scikit-learn__scikit-learn-25102": "Preserving dtypes for DataFrame output "
    "by transformers that do not modify the input values",
    "minisweagent-sphinx-doc__sphinx-9258": "[RFE] Support union types specification using "
    "| (vertical bar/pipe)",
    "openhands-multiswebench-ponyc-3runs-ponylang__ponyc-4595": "I've uploaded a C code "
    "repository in the directory ponylang__ponyc__0.1.",
    "openhands-multiswebench-ponyc-3runs-ponylang__ponyc-4593": "I've uploaded a C code "
    "repository in the directory ponylang__ponyc__0.1.",
    "openhands-multiswebench-ponyc-3runs-ponylang__ponyc-4588": "I've uploaded a C code "
    "repository in the directory ponylang__ponyc__0.1.",
    "sweagent-marshmallow-1867-function_calling_replace": "We're currently solving the "
    "following issue within our repository.",
}
"""Each run's task, as its first sentence (for a SWE-bench task, the issue's title, which
is the first sentence of the issue the wrapper holds)."""

_ERROR_WORDS = re.compile(
    r"Error:|Exception:|ERROR|FAIL|error:|fatal:|panic:|command not found"
    r"|No such file or directory|Segmentation fault"
)
_OBSERVATION = re.compile(r"\A\s*(?:<returncode>|OBSERVATION:|<output>)")
_EMPTY = re.compile(r"^(?:none|n/a|not stated.*|no error.*|no file.*|no assistant.*)?$", re.I)


def fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def output_texts(msg: Msg) -> list[str]:
    """The tool output a message carries: its tool results, or itself when it is a user
    message the format uses for a command's output."""
    texts = []
    for result in msg.tool_results:
        if isinstance(result.output, str):
            texts.append(result.output)
        else:
            texts.append("\n".join(b.text for b in result.output if isinstance(b, TextBlock)))
    if msg.role == "user" and not msg.tool_results and _OBSERVATION.match(msg.text[:200]):
        texts.append(msg.text)
    return [_codex_output(t.split("<<<TRUNCATED>>>", 1)[0]) for t in texts]


def _codex_output(text: str) -> str:
    """A Codex shell output's text (the format wraps it in JSON with its exit code)."""
    if text.startswith('{"output"'):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            return value["output"]
        # Cut, so no longer JSON: its escapes read back by hand.
        body = text.removeprefix('{"output":"')
        return body.replace("\\n", "\n").replace('\\"', '"').replace("\\t", "\t")
    return text


def error_lines(messages: list[Msg]) -> set[str]:
    """The distinct error and failure lines of the tool output among `messages`."""
    found = set()
    for msg in messages:
        for text in output_texts(msg):
            for line in text.splitlines():
                if line[:1] not in (" ", "\t") and _ERROR_WORDS.search(line):
                    found.add(fold(line)[:60])
    return found


def commands_left(messages: list[Msg]) -> bool:
    return any(m.tool_calls or "```" in m.text for m in messages if m.role == "assistant")


async def measure_run(name: str, messages: list[Msg], window: int) -> dict[str, Any]:
    """Replay one run at one window with no summary model; the measures of its compactions."""
    task = fold(TASKS.get(name) or "")
    counts = {"compactions": 0, "task": 0, "task_shown": 0, "errors": 0, "named": 0}
    counts.update({"named_shown": 0, "none": 0, "pinned": 0})
    with tempfile.TemporaryDirectory() as tmp:
        workspace = LocalWorkspace(Path(tmp) / "ws", fsync=False)
        await workspace.initialize()
        compressor = Compressor(
            ContextConfig(context_window=window),
            offloader=workspace,
            session_id="s",
            counter=get_token_counter(),
        )
        context: list[Msg] = []
        for msg in messages:
            if msg.role == "assistant" and context:
                step = await compressor.maybe_compress(context)
                if step.compressed and step.summary is not None:
                    stay = {m.id for m in step.messages}
                    left = [m for m in context if m.id not in stay and not is_context_note(m)]
                    note = next(m for m in step.messages if is_summary_message(m))
                    shown = fold(note.text)
                    index = (
                        shown.split("<artifact_index>", 1)[-1]
                        if "<artifact_index>" in (shown)
                        else ""
                    )
                    fields = step.summary.model_dump()
                    whole = fold("\n".join(fields.values())) + "\n" + index
                    counts["compactions"] += 1
                    # A request that never left stays in the context verbatim (the latest
                    # request always does): the overview need not repeat it.
                    pinned = any(task in fold(m.text) for m in step.messages if m is not note)
                    counts["pinned"] += pinned
                    has_task = pinned or task in fold(fields["task_overview"])
                    counts["task"] += has_task
                    counts["task_shown"] += pinned or task in shown
                    lines = error_lines(left)
                    counts["errors"] += len(lines)
                    counts["named"] += sum(line in whole for line in lines)
                    counts["named_shown"] += sum(line in shown for line in lines)
                    holds = {
                        "task_overview": any(task in fold(m.text) for m in left),
                        "current_state": any(m.role == "assistant" for m in left),
                        "next_steps": any(m.role == "assistant" for m in left),
                        "important_discoveries": bool(lines),
                        "context_to_preserve": commands_left(left),
                    }
                    empty = [k for k, v in fields.items() if holds[k] and _EMPTY.match(fold(v))]
                    counts["none"] += len(empty)
                    if VERBOSE:
                        missed = sorted(line for line in lines if line not in whole)
                        said = f"task {has_task} none {empty}; missed {missed}"
                        said += "" if has_task else f" overview {fields['task_overview']!r}"
                        print(f"{name} {window}: {said}", file=sys.stderr)
                context = step.messages
            context.append(await compressor.process_message(msg))
    return counts


def corpus_runs() -> list[tuple[str, list[Msg]]]:
    files = sorted(p for p in CORPUS.glob("*") if p.name != "SOURCES.md")
    if not files:
        raise SystemExit(f"the transcript corpus {CORPUS} is not there")
    runs = []
    for path in files:
        _fmt, loaded = load_transcript(path)
        runs += [(run.name, run.messages) for run in loaded]
    return runs


def measure() -> list[dict[str, Any]]:
    rows = []
    for name, messages in corpus_runs():
        for window in WINDOWS:
            counts = asyncio.run(measure_run(name, messages, window))
            rows.append({"run": name, "window": window, **counts})
    return rows


def before(ref: str) -> list[dict[str, Any]] | None:
    """The measures on the code of the git ref `ref`, or None when it cannot be read."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot read {ref}: {exc}", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        child = subprocess.run(
            [sys.executable, __file__, "--no-compare", "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    rows: list[dict[str, Any]] = json.loads(child.stdout)
    return rows


def ratio(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "-"


def report(rows: list[dict[str, Any]], earlier: list[dict[str, Any]] | None) -> None:
    old = {(r["run"], r["window"]): r for r in earlier or []}
    print(
        f"{'run':<46} {'window':>6} {'compact':>7} {'task (shown)':>15} "
        f"{'errors named (shown)':>22} {'none':>4}"
        + ("   before: task  errors  none" if old else "")
    )
    total: dict[str, int] = {}
    total_old: dict[str, int] = {}
    for r in rows:
        for key, value in r.items():
            if isinstance(value, int) and key != "window":
                total[key] = total.get(key, 0) + value
        line = (
            f"{r['run'][:46]:<46} {r['window']:>6} {r['compactions']:>7} "
            f"{ratio(r['task'], r['compactions']) + ' (' + str(r['task_shown']) + ')':>15} "
            f"{ratio(r['named'], r['errors']) + ' (' + str(r['named_shown']) + ')':>22} "
            f"{r['none']:>4}"
        )
        was = old.get((r["run"], r["window"]))
        if was is not None:
            for key, value in was.items():
                if isinstance(value, int) and key != "window":
                    total_old[key] = total_old.get(key, 0) + value
            line += (
                f"   {ratio(was['task'], was['compactions']):>11} "
                f"{ratio(was['named'], was['errors']):>7} {was['none']:>5}"
            )
        print(line)

    def summary(t: dict[str, int]) -> str:
        task = t["task"] / t["compactions"] if t["compactions"] else 0
        named = t["named"] / t["errors"] if t["errors"] else 0
        shown = t["named_shown"] / t["errors"] if t["errors"] else 0
        return (
            f"task in overview {t['task']}/{t['compactions']} ({task:.0%}; {t.get('pinned', 0)} "
            f"with it still in the context; shown in the context {t['task_shown']}), "
            f"errors named {t['named']}/{t['errors']} ({named:.0%}; shown {shown:.0%}), "
            f"fields 'none' while something left for them: {t['none']}"
        )

    print(f"\ntotal: {summary(total)}")
    if total_old:
        print(f"before: {summary(total_old)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", default="lead", metavar="REF")
    parser.add_argument("--no-compare", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure()
    if args.json:
        print(json.dumps(rows))
        return
    report(rows, None if args.no_compare else before(args.compare))


if __name__ == "__main__":
    main()
