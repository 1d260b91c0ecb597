"""Start-up cost of `import ctxoffload` and of the `ctxoffload` command, as whole processes.

Each command runs as a fresh interpreter, best of several rounds (each round runs every
command once, in turn), after one warm-up run (an installed package has its bytecode
cached; under PYTHONDONTWRITEBYTECODE an editable install would recompile every module at
each start, so the variable is removed for the children).

Targets (issue 13): `import ctxoffload` <= 1.3x `import pydantic`; `ctxoffload --help` <= 1.5x
`python -c pass` + `import argparse`. Also printed: the first real use, `from ctxoffload import
Agent, LocalWorkspace, ContextConfig`, which loads what those need (pydantic's models among
them), against `import pydantic` (issue 28 asked for <= 2x) and against the least a program
with one pydantic model and asyncio pays; and the first exact count in a fresh process, the
whole process timed (issue 28: <= 150 ms), with rs-bpe and with tiktoken. Counting a text
loads no pydantic model.
Run: `python bench/bench_import.py [--runs N]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# What any program that defines one pydantic model pays: pydantic's model machinery (imported
# on first use of BaseModel, not by `import pydantic`), its plugin loader (importlib.metadata)
# and the model's build.
_ONE_MODEL = "from pydantic import BaseModel, Field\nclass A(BaseModel):\n    x: int = Field(1)"


def best_of_rounds(code: dict[str, list[str]], runs: int) -> dict[str, float]:
    """The best time of each command over `runs` rounds, each round running every command
    once in turn: a burst of load on a shared machine falls on all of them alike, where a
    command's runs taken together could all land in one (a ratio then meant nothing)."""
    for args in code.values():  # warm-up
        subprocess.run(args, env=ENV, check=True, stdout=subprocess.DEVNULL)
    times: dict[str, list[float]] = {name: [] for name in code}
    for _ in range(runs):
        for name, args in code.items():
            start = time.perf_counter()
            subprocess.run(args, env=ENV, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    return {name: min(seconds) for name, seconds in times.items()}


def main(runs: int) -> None:
    py = sys.executable
    code = {
        "python -c pass": [py, "-c", "pass"],
        "import argparse": [py, "-c", "import argparse"],
        "import pydantic": [py, "-c", "import pydantic"],
        "one pydantic model with a Field": [py, "-c", _ONE_MODEL],
        "one pydantic model, and import asyncio": [py, "-c", _ONE_MODEL + "\nimport asyncio"],
        "import ctxoffload": [py, "-c", "import ctxoffload"],
        "first use (Agent, LocalWorkspace, ContextConfig)": [
            py,
            "-c",
            "from ctxoffload import Agent, LocalWorkspace, ContextConfig",
        ],
        "get_token_counter (no count)": [
            py,
            "-c",
            "from ctxoffload import get_token_counter",
        ],
        "first exact count (rs-bpe, the fast extra)": [
            py,
            "-c",
            "from ctxoffload import get_token_counter; "
            "get_token_counter(exact=True).count_text('hello')",
        ],
        "first exact count (tiktoken)": [
            py,
            "-c",
            "from ctxoffload.tokens import TiktokenCounter; "
            "TiktokenCounter(fast=False).count_text('hello')",
        ],
        "ctxoffload --help": [
            py,
            "-c",
            "import sys; from ctxoffload.cli import main; main(['--help'])",
        ],
    }
    times = best_of_rounds(code, runs)
    for name, seconds in times.items():
        print(f"{name:<50} {seconds * 1000:7.1f} ms")
    pydantic = times["import pydantic"]
    print(
        f"import ctxoffload / import pydantic: {times['import ctxoffload'] / pydantic:.2f}x "
        "(target <= 1.3)"
    )
    first = times["first use (Agent, LocalWorkspace, ContextConfig)"]
    floor = times["one pydantic model, and import asyncio"]
    print(
        f"first use / import pydantic: {first / pydantic:.2f}x (target <= 2; one pydantic "
        f"model with a Field alone is {times['one pydantic model with a Field'] / pydantic:.2f}x)"
    )
    print(f"first use / (one pydantic model, and import asyncio): {first / floor:.2f}x")
    for name in ("first exact count (rs-bpe, the fast extra)", "first exact count (tiktoken)"):
        print(f"{name}: {times[name] * 1000:.0f} ms in a fresh process (target <= 150)")
    print(
        f"ctxoffload --help / (python -c 'import argparse'): "
        f"{times['ctxoffload --help'] / times['import argparse']:.2f}x (target <= 1.5)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    main(parser.parse_args().runs)
