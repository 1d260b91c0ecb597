"""Every ```` ```python ```` block of README.md and docs/ runs as written, offline.

The conventions are those of tests/docs/blocks.py. Each block is one test, named by its page
and the line of its opening fence. It runs in a child process of its own, as a script, in a
fresh temporary folder: a `continues` block after the blocks it continues, in their namespace
(they run first in the same process, their output set aside); a `server` block with
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
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blocks import Block, blocks, matches, pages

from openai_server import OpenAIServer, chat_completion, closed_port_url

# More would make skipping the norm: a block that cannot run here should be rare.
MAX_SKIPPED_BLOCKS = 5

FINAL_ANSWER = "The nightly job failed on a full disk."
"""What the local server answers to every request of a `server` block."""

# Runs in the child: executes the blocks of one chain in one namespace, each compiled under
# its page's path with the page's line numbers, and prints only the last block's output.
DRIVER = r"""
import contextlib, io, json, sys
spec = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
for index, part in enumerate(spec):
    code = compile("\n" * part["line"] + part["code"], part["page"], "exec")
    sys.argv = [part["page"]]
    if index < len(spec) - 1:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)
    else:
        exec(code, namespace)
"""


def python_blocks() -> Iterator[tuple[Block, list[Block]]]:
    """Each Python block of every page, with the chain it runs in (itself last)."""
    for page in pages():
        chain: list[Block] = []
        for block in blocks(page):
            if block.language != "python":
                continue
            chain = [*chain, block] if "continues" in block.annotations else [block]
            yield block, chain


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


def run_chain(
    chain: list[Block], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    spec = [{"page": str(b.page), "line": b.line, "code": b.code} for b in chain]
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


@pytest.mark.parametrize(("block", "chain"), CASES, ids=[b.where for b, _ in CASES])
def test_python_block_runs_as_written(block: Block, chain: list[Block], tmp_path: Path) -> None:
    skipped = [b for b in chain if "skip" in b.annotations]
    if skipped:
        reason = skipped[-1].annotations["skip"]
        pytest.skip(f"{block.where}: {reason}")
    if any("server" in b.annotations for b in chain):
        with OpenAIServer() as server:
            server.responder = server_answer
            done = run_chain(
                chain,
                tmp_path,
                child_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key"),
            )
    else:
        done = run_chain(chain, tmp_path, child_env(OPENAI_BASE_URL=closed_port_url()))
    if done.returncode != 0:
        earlier = f" (after {', '.join(b.where for b in chain[:-1])})" if len(chain) > 1 else ""
        pytest.fail(
            f"{block.where}: the block failed{earlier}:\n{done.stderr}{done.stdout}",
            pytrace=False,
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
        for block, _ in CASES
        if "skip" not in block.annotations
        for line in awaits_outside_functions(block.code)
    ]
    assert not offenders, "top-level await in: " + ", ".join(offenders)


def test_the_await_check_finds_a_top_level_await() -> None:
    assert awaits_outside_functions("import asyncio\nawait asyncio.sleep(0)\n") == [2]
    assert awaits_outside_functions("async def f():\n    await g()\n") == []
    assert awaits_outside_functions("async with x:\n    pass\n") == [1]


def test_few_blocks_are_skipped() -> None:
    skipped = [b.where for b, _ in CASES if "skip" in b.annotations]
    assert len(skipped) <= MAX_SKIPPED_BLOCKS, (
        f"{len(skipped)} Python blocks are skipped (at most {MAX_SKIPPED_BLOCKS}): "
        + ", ".join(skipped)
    )
