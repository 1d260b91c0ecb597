"""What each way of finding ctxoffload costs a Claude Code hook, per tool call.

Claude Code runs `PostToolUse` after every tool call as a fresh process through a shell. Timed
here, whole processes, best of several runs taken in turn after a warm-up, on a small output
(the common case, answered before the engine loads):

- the command `ctxoffload hook settings` prints: the `ctxoffload` script by its absolute path,
  the baseline;
- the plugin's launcher (`/bin/sh hooks/run-ctxoffload hook PostToolUse`) finding the script
  in the clone's `.venv`, and finding no script but a `python3` that imports ctxoffload;
- `python -c pass`, the floor of any Python hook, and `python -c "import asyncio"`, which the
  small output's hook loaded on top of the rest until it was answered ahead of asyncio.

Each is printed as a ratio against the baseline. Run: `python bench/bench_hook_start.py
[--runs N]` from the virtual environment that holds ctxoffload.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "integrations" / "claude-code-plugin"
INPUT = json.dumps(
    {
        "session_id": "bench",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        "tool_response": {"stdout": "3 passed", "stderr": "", "interrupted": False},
        "tool_use_id": "toolu_bench",
    }
).encode()


def run_once(command: str, env: dict[str, str]) -> float:
    """Seconds `command` takes by `/bin/sh -c`, fed the small output's hook input."""
    start = time.perf_counter()
    done = subprocess.run(["/bin/sh", "-c", command], input=INPUT, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or done.stdout or done.stderr:
        sys.exit(f"{command!r} did not answer as a hook: {done.stderr.decode()[-500:]}")
    return elapsed


def clone_with_plugin(folder: Path, *, venv: bool) -> str:
    """A clone holding the plugin (and, when `venv`, this environment as its .venv); the
    command of the plugin's launcher in it."""
    plugin = folder / "integrations" / "claude-code-plugin"
    shutil.copytree(PLUGIN, plugin)
    if venv:
        (folder / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return f"/bin/sh {shlex.quote(str(plugin / 'hooks' / 'run-ctxoffload'))} hook PostToolUse"


def main(runs: int) -> None:
    script = Path(sys.executable).parent / "ctxoffload"
    if not script.is_file():
        sys.exit(f"no ctxoffload script beside {sys.executable}: run from its environment")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/"),
        "CTXOFFLOAD_WORKDIR": "/nonexistent",  # never reached: the output is small
    }
    python = shlex.quote(sys.executable)
    with tempfile.TemporaryDirectory() as folder:
        found = Path(folder) / "bin"
        found.mkdir()
        (found / "python3").write_text(f'#!/bin/sh\nexec {python} "$@"\n')
        (found / "python3").chmod(0o755)
        with_python3 = {**env, "PATH": f"{found}:/usr/bin:/bin"}
        commands = {
            "`hook settings` command (absolute path), baseline": (
                f"{shlex.quote(str(script))} hook PostToolUse",
                env,
            ),
            "plugin launcher, the clone's .venv": (
                clone_with_plugin(Path(folder) / "a", venv=True),
                env,
            ),
            "plugin launcher, python3 importing ctxoffload": (
                clone_with_plugin(Path(folder) / "b", venv=False),
                with_python3,
            ),
            "python -c pass": (f"{python} -c pass", env),
            "python -c 'import asyncio'": (f"{python} -c 'import asyncio'", env),
        }
        # Round robin, after a warm-up round: a busy moment slows every command alike.
        times: dict[str, list[float]] = {name: [] for name in commands}
        for index in range(runs + 1):
            for name, (command, environment) in commands.items():
                elapsed = run_once(command, environment)
                if index:
                    times[name].append(elapsed)
    best = {name: min(each) for name, each in times.items()}
    baseline = next(iter(best.values()))
    for name, seconds in best.items():
        print(f"{name:<50} {seconds * 1000:7.1f} ms  {seconds / baseline:5.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    main(parser.parse_args().runs)
