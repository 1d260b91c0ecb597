"""How long `ctxoffload demo` takes, as a user runs it (a fresh process in a fresh folder).

Target (issue 13): at most 3 s on the 2-core machines this project is built on. Also printed,
as the baseline measured in the same run: the start-up of `python -c "import ctxoffload"`.
Run: `python bench/bench_demo.py [--runs N]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def best(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            subprocess.run(args, cwd=folder, env=ENV, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
    return min(times)


def main(runs: int) -> None:
    startup = best([sys.executable, "-c", "import ctxoffload"], runs)
    demo = best([sys.executable, "-m", "ctxoffload", "demo"], runs)
    print(f"python -c 'import ctxoffload': {startup:.3f} s")
    print(f"ctxoffload demo:               {demo:.2f} s ({demo / 3:.2f} of the 3 s target)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    main(parser.parse_args().runs)
