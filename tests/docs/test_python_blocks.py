"""Every ```` ```python ```` block of README.md and docs/ runs as written, offline.

The conventions are those of tests/docs/blocks.py. Each block is one test, named by its page
and the line of its opening fence. It runs alone, as a reader who copies it runs it: in a
child process of its own, as a script, in a fresh temporary folder; a `server` block with
`OPENAI_BASE_URL` and `OPENAI_API_KEY` naming a local OpenAI-compatible server
(tests/openai_server.py) that answers every request with a short final answer. Every other
block gets an `OPENAI_BASE_URL` where nothing listens, so a block that reaches for a model
server it was not given fails at once instead of going to the network. The code is compiled
under the page's own path with its own line numbers, so a traceback names the line of the
page. A `test: output` block after a Python block is what it must print.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blocks import Block, blocks, matches, pages

from helpers import unreleased_leases
from openai_server import OpenAIServer, chat_completion, closed_port_url

# More would make skipping the norm: a block that cannot run here should be rare.
MAX_SKIPPED_BLOCKS = 5

FINAL_ANSWER = "The nightly job failed on a full disk."
"""What the local server answers to every request of a `server` block."""

# Runs in the child: executes one block as a script, compiled under its page's path with the
# page's line numbers.
DRIVER = r"""
import json, sys
part = json.loads(sys.stdin.read())
code = compile("\n" * part["line"] + part["code"], part["page"], "exec")
sys.argv = [part["page"]]
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
"""


def python_blocks() -> Iterator[Block]:
    """Each Python block of every page."""
    for page in pages():
        yield from (block for block in blocks(page) if block.language == "python")


CASES = list(python_blocks())


def server_answer(body: Any) -> dict[str, Any]:
    """A short final answer; a valid summary when the request asks for structured output."""
    if isinstance(body, dict) and body.get("response_format"):
        fields = (
            "task_overview",
            "current_state",
            "important_discoveries",
            "next_steps",
            "context_to_preserve",
        )
        return chat_completion(json.dumps({name: FINAL_ANSWER for name in fields}))
    return chat_completion(FINAL_ANSWER)


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The block as a script of its own, in a fresh interpreter."""
    spec = {"page": str(block.page), "line": block.line, "code": block.code}
    return subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def child_env(**extra: str) -> dict[str, str]:
    """This environment without the variables that would point a block at a model server
    or a workspace of this machine, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXOFFLOAD_"))}
    return {**env, **extra}


@pytest.mark.parametrize("block", CASES, ids=[b.where for b in CASES])
def test_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if "skip" in block.annotations:
        pytest.skip(f"{block.where}: {block.annotations['skip']}")
    if "server" in block.annotations:
        with OpenAIServer() as server:
            server.responder = server_answer
            done = run_block(
                block,
                tmp_path,
                child_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key"),
            )
    else:
        done = run_block(block, tmp_path, child_env(OPENAI_BASE_URL=closed_port_url()))
    if done.returncode != 0:
        pytest.fail(f"{block.where}: the block failed:\n{done.stderr}{done.stdout}", pytrace=False)
    # An agent left open keeps its session's lease, and the reader's second run would take it
    # over: every example closes its agents (`async with` or `aclose()`).
    left_open = unreleased_leases(tmp_path)
    assert not left_open, (
        f"{block.where}: an agent was never closed, its lease is held: {left_open}"
    )
    if block.output is not None and not matches(block.output.code, done.stdout):
        diff = "\n".join(
            difflib.unified_diff(
                block.output.code.splitlines(),
                done.stdout.splitlines(),
                f"expected ({block.output.where})",
                "printed",
                lineterm="",
            )
        )
        pytest.fail(f"{block.where}: the output differs from the page:\n{diff}", pytrace=False)


def awaits_outside_functions(code: str) -> list[int]:
    """Lines of `await`, `async for` and `async with` that no function encloses."""
    found: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) and not in_function:
            found.append(node.lineno)
        inside = in_function or isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        )
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(code), False)
    return found


def test_no_block_awaits_at_the_top_level() -> None:
    """A block with a top-level `await` cannot run as a script: wrap it in `async def main()`
    and `asyncio.run(main())`."""
    offenders = [
        f"{block.where} (block line {line})"
        for block in CASES
        if "skip" not in block.annotations
        for line in awaits_outside_functions(block.code)
    ]
    assert not offenders, "top-level await in: " + ", ".join(offenders)


def test_the_await_check_finds_a_top_level_await() -> None:
    assert awaits_outside_functions("import asyncio\nawait asyncio.sleep(0)\n") == [2]
    assert awaits_outside_functions("async def f():\n    await g()\n") == []
    assert awaits_outside_functions("async with x:\n    pass\n") == [1]


def test_few_blocks_are_skipped() -> None:
    # A host's guide runs against the real host in its own environment: its block is skipped
    # here only when it names the test file of tests/integrations/ that runs it, which exists.
    elsewhere = re.compile(r"tests/integrations/test_\w+\.py")
    root = Path(__file__).resolve().parents[2]
    skipped = []
    for b in CASES:
        if "skip" not in b.annotations:
            continue
        named = elsewhere.findall(b.annotations["skip"])
        if not (named and all((root / name).is_file() for name in named)):
            skipped.append(b.where)
    assert len(skipped) <= MAX_SKIPPED_BLOCKS, (
        f"{len(skipped)} Python blocks are skipped (at most {MAX_SKIPPED_BLOCKS}): "
        + ", ".join(skipped)
    )
