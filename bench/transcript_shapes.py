"""Transcripts of other shapes than the corpus's, generated from a seed (issue 84).

The corpus (`../shared/corpus`) is thirteen real runs; a rule tuned on them must hold on the
next. This writes runs of four shapes, in formats `bench_peers.py` already reads, with content
that reads like an agent's (Python code, logs, grep and test output, JSON, diffs, reports,
each built from varied vocabularies, never one line repeated):

- `long-outputs` (Claude Code `.jsonl`): a few tool results of 20-200 KB (a service's log, a
  file read whole, an API's JSON, a `find` listing) among small ones;
- `many-small` (Claude Code `.jsonl`): hundreds of calls whose results are 50-500 bytes;
- `subagents` (Claude Code `.jsonl`): `Task` calls whose results are long reports of a
  sub-agent, with the sub-agent's own tool use as side-chain records (which a reader of the
  main agent's context skips, as Claude Code's own transcript has them);
- `swe` (mini-swe-agent `.traj.json`): one bash command an answer, outputs of every size.

The same seed writes the same bytes, with no network and no clock:

    python bench/transcript_shapes.py OUT [--seed 84] [--runs 2] [--shapes long-outputs ...]
    python bench/bench_peers.py --shapes [NAME ...] [--seed 84]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SEED = 84
SHAPES = ("long-outputs", "many-small", "subagents", "swe")


def _words(text: str) -> list[str]:
    return text.split()


_NOUNS = _words(
    "account invoice ledger session token cache bucket shard replica lease queue worker job "
    "batch record segment index cursor offset chunk frame packet header payload schema field "
    "column table row migration snapshot checkpoint manifest bundle artifact plugin adapter "
    "handler router endpoint request response client server pool socket stream buffer codec "
    "parser lexer token grammar node edge graph vertex path route tenant user group role "
    "policy permission audit event metric counter gauge histogram span trace config setting "
    "profile option flag feature channel topic subscriber publisher broker consumer producer "
    "scheduler timer deadline retry backoff limit quota budget window ratio threshold"
)
_VERBS = _words(
    "load save parse render build fetch flush merge split resolve validate normalize encode "
    "decode compress expand read write open close start stop reset retry schedule dispatch "
    "collect filter sort group count apply revert commit rollback publish subscribe attach "
    "detach register lookup evict refresh sync compact rotate prune scan index"
)
_ADJ = _words(
    "stale pending active idle broken partial nested remote local cached dirty primary "
    "secondary default custom legacy async sync lazy eager strict loose raw safe unsafe "
    "internal external temporary durable"
)
_PACKAGES = _words(
    "billing gateway storage scheduler telemetry auth search ingest reports notify "
    "inventory ledgerd catalog payments sync"
)
_LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARNING", "ERROR")
_EXCEPTIONS = _words(
    "KeyError ValueError TimeoutError ConnectionResetError AssertionError TypeError "
    "IntegrityError PermissionError FileNotFoundError RuntimeError"
)


class Text:
    """The generators of realistic agent content, on one random source."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.package = rng.choice(_PACKAGES)
        self.modules = [self.ident() for _ in range(rng.randint(8, 14))]
        self.files = [f"src/{self.package}/{m}.py" for m in self.modules]
        self.tests = [f"tests/test_{m}.py" for m in self.modules]
        self.clock = rng.randint(1_700_000_000, 1_760_000_000)

    def ident(self) -> str:
        r = self.r
        return "_".join(r.sample(_VERBS, 1) + r.sample(_NOUNS, r.randint(1, 2)))

    def camel(self) -> str:
        return "".join(w.title() for w in self.r.sample(_ADJ + _NOUNS, 2))

    def sentence(self, words: int = 0) -> str:
        r = self.r
        n = words or r.randint(6, 16)
        pool = _NOUNS + _VERBS + _ADJ + ["the", "a", "of", "to", "when", "if", "is", "not"]
        out = " ".join(r.choice(pool) for _ in range(n))
        return out[0].upper() + out[1:] + "."

    def hexid(self, n: int = 8) -> str:
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def path(self) -> str:
        return self.r.choice(self.files + self.tests)

    # -- code -------------------------------------------------------------------------------

    def function(self, indent: str = "") -> list[str]:
        r = self.r
        name, args = self.ident(), r.sample(_NOUNS, r.randint(1, 3))
        body = [f"{indent}def {name}({', '.join(args)}):", f'{indent}    """{self.sentence()}"""']
        for _ in range(r.randint(3, 12)):
            a, b = r.choice(args), self.ident()
            kind = r.randrange(6)
            if kind == 0:
                body += [
                    f"{indent}    if {a} is None:",
                    f"{indent}        raise {r.choice(_EXCEPTIONS)}(f'{{{a}!r}} {r.choice(_ADJ)}')",
                ]
            elif kind == 1:
                body += [
                    f"{indent}    for item in {a}.{r.choice(_NOUNS)}s:",
                    f"{indent}        {b}(item, {r.randint(0, 512)})",
                ]
            elif kind == 2:
                body.append(f"{indent}    {r.choice(_NOUNS)} = {b}({a}, {r.choice(args)})")
            elif kind == 3:
                body.append(f"{indent}    # {self.sentence()}")
            elif kind == 4:
                body.append(f"{indent}    log.{r.choice(['debug', 'info', 'warning'])}(")
                body.append(f"{indent}        '{self.sentence(5)} %s', {a})")
            else:
                body.append(f"{indent}    {a}.{r.choice(_VERBS)}(timeout={r.randint(1, 90)})")
        body.append(f"{indent}    return {r.choice(args)}")
        return body

    def module(self, lines: int) -> str:
        r = self.r
        out = [f'"""{self.sentence()}"""', "", "from __future__ import annotations", ""]
        out += [f"from .{m} import {self.ident()}" for m in r.sample(self.modules, 3)]
        out += ["import logging", "", "log = logging.getLogger(__name__)", ""]
        while len(out) < lines:
            if r.random() < 0.3:
                out += ["", "", f"class {self.camel()}:", f'    """{self.sentence()}"""', ""]
                for _ in range(r.randint(1, 4)):
                    out += [*self.function("    "), ""]
            else:
                out += ["", "", *self.function()]
        return "\n".join(out[:lines]) + "\n"

    def numbered(self, text: str, start: int = 1) -> str:
        return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.splitlines(), start))

    # -- tool outputs ------------------------------------------------------------------------

    def log(self, size: int) -> str:
        r, out, n = self.r, [], 0
        while n < size:
            self.clock += r.randint(0, 4)
            ms = r.randint(0, 999)
            level = r.choice(_LEVELS)
            logger = f"{self.package}.{r.choice(self.modules)}"
            kind = r.randrange(5)
            if kind == 0:
                msg = (
                    f"{r.choice(_VERBS)} {r.choice(_NOUNS)} id={self.hexid()} "
                    f"took {r.randint(1, 4000)}ms"
                )
            elif kind == 1:
                msg = (
                    f"GET /api/v{r.randint(1, 3)}/{r.choice(_NOUNS)}s/{r.randint(1, 99999)} "
                    f"{r.choice([200, 200, 201, 204, 404, 409, 500, 503])} "
                    f"{r.randint(120, 98000)}B"
                )
            elif kind == 2:
                msg = (
                    f"{r.choice(_ADJ)} {r.choice(_NOUNS)} in {self.path()}:{r.randint(1, 900)}"
                    f" ({r.choice(_EXCEPTIONS)})"
                )
            elif kind == 3:
                msg = self.sentence()
            else:
                msg = (
                    f"worker-{r.randint(1, 16)} {r.choice(_VERBS)}ed {r.randint(1, 5000)} "
                    f"{r.choice(_NOUNS)}s, queue={r.randint(0, 900)}"
                )
            line = f"2025-{self.stamp()}.{ms:03d} {level:7} [{logger}] {msg}"
            if level == "ERROR" and r.random() < 0.5:
                line += "\n" + self.traceback()
            out.append(line)
            n += len(line) + 1
        return "\n".join(out)

    def stamp(self) -> str:
        t = self.clock
        return (
            f"{(t // 2_600_000) % 12 + 1:02d}-{(t // 86_400) % 28 + 1:02d} "
            f"{(t // 3600) % 24:02d}:{(t // 60) % 60:02d}:{t % 60:02d}"
        )

    def traceback(self) -> str:
        r = self.r
        frames = []
        for _ in range(r.randint(2, 6)):
            frames += [
                f'  File "/srv/app/{self.path()}", line {r.randint(1, 900)}, in {self.ident()}',
                f"    {r.choice(_NOUNS)} = {self.ident()}({r.choice(_NOUNS)})",
            ]
        exc = r.choice(_EXCEPTIONS)
        return (
            "Traceback (most recent call last):\n"
            + "\n".join(frames)
            + (f"\n{exc}: {self.sentence(6)}")
        )

    def json_dump(self, size: int) -> str:
        r, items, n = self.r, [], 0
        while n < size:
            item = {
                "id": f"{r.choice(_NOUNS)}-{self.hexid(12)}",
                "name": self.ident(),
                "status": r.choice(["open", "closed", "pending", "failed", "merged"]),
                "owner": {"login": f"{r.choice(_ADJ)}{r.choice(_NOUNS)}{r.randint(1, 99)}"},
                "labels": r.sample(_NOUNS, r.randint(0, 4)),
                "size_bytes": r.randint(0, 10**7),
                "updated_at": f"2025-{self.stamp().replace(' ', 'T')}Z",
                "path": self.path(),
                "summary": self.sentence(),
            }
            text = json.dumps(item, indent=2)
            items.append(text)
            n += len(text) + 2
        return "[\n" + ",\n".join(items) + "\n]"

    def listing(self, size: int) -> str:
        r, out, n = self.r, [], 0
        while n < size:
            parts = [self.package] + [r.choice(_NOUNS) for _ in range(r.randint(1, 4))]
            ext = r.choice([".py", ".py", ".json", ".md", ".txt", ".yaml", ".sql"])
            line = f"./{'/'.join(parts)}/{self.ident()}{ext}"
            out.append(line)
            n += len(line) + 1
        return "\n".join(out)

    def grep(self, matches: int) -> str:
        r, word = self.r, self.r.choice(_NOUNS)
        return "\n".join(
            f"{self.path()}:{r.randint(1, 900)}:    {self.ident()}({word}, {r.choice(_NOUNS)})"
            for _ in range(matches)
        )

    def pytest(self, tests: int) -> str:
        r, failed = self.r, []
        lines = [
            "============================= test session starts ==============================",
            f"platform linux -- Python 3.11.{r.randint(2, 9)}, pytest-8.{r.randint(0, 3)}.0",
            f"collected {tests} items",
            "",
        ]
        for test in r.sample(self.tests, min(len(self.tests), 5)):
            marks = "".join(r.choice("......F.s") for _ in range(r.randint(5, 40)))
            lines.append(f"{test} {marks}")
            if "F" in marks:
                failed.append(f"{test}::test_{self.ident()}")
        for name in failed:
            lines += ["", f"____ {name} ____", self.traceback()]
        took = f"{r.random() * 30:.2f}s"
        lines.append(f"==== {len(failed)} failed, {tests - len(failed)} passed in {took} ====")
        return "\n".join(lines)

    def diff(self) -> str:
        r, path = self.r, self.path()
        body = self.function()
        keep = r.randint(1, len(body) - 1)
        new = [f"+{line}" for line in self.function()[: r.randint(2, 6)]]
        return "\n".join(
            [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
            + [f"@@ -{r.randint(1, 400)},{len(body)} +{r.randint(1, 400)},{len(body)} @@"]
            + [f" {line}" for line in body[:keep]]
            + [f"-{line}" for line in body[keep : keep + 2]]
            + new
        )

    def small(self) -> str:
        """A result of 50-500 bytes: a short read, a few grep lines, a test's outcome."""
        r = self.r
        kind = r.randrange(7)
        if kind == 0:
            start = r.randint(1, 400)
            return self.numbered("\n".join(self.function()[: r.randint(2, 6)]), start)
        if kind == 1:
            return self.grep(r.randint(1, 4))
        if kind == 2:
            name = f"{self.r.choice(self.tests)}::test_{self.ident()}"
            return f"{name} {'PASSED' if r.random() < 0.7 else 'FAILED'} [{r.randint(1, 100)}%]"
        if kind == 3:
            return f"The file {self.path()} has been updated. {self.sentence()}"
        if kind == 4:
            return "\n".join(self.listing(r.randint(60, 300)).splitlines()[:4])
        if kind == 5:
            return self.log(r.randint(80, 400))
        return json.dumps({"ok": r.random() < 0.8, self.ident(): r.randint(0, 10**6)})

    def report(self, size: int) -> str:
        """A sub-agent's final report: headings, findings naming files, a list of changes."""
        r = self.r
        out = [f"## {self.camel()} {r.choice(['review', 'analysis', 'migration', 'fix'])}", ""]
        while sum(len(x) + 1 for x in out) < size:
            out += [f"### {self.sentence(4)[:-1]}", self.sentence(r.randint(12, 30))]
            for _ in range(r.randint(2, 6)):
                out.append(
                    f"- `{self.path()}:{r.randint(1, 900)}` `{self.ident()}`: {self.sentence()}"
                )
            if r.random() < 0.4:
                out += ["```python", *self.function()[: r.randint(3, 10)], "```"]
            out.append("")
        return "\n".join(out)


# -- the formats ----------------------------------------------------------------------------


class ClaudeCode:
    """Records of a Claude Code session, in the shape of `~/.claude/projects/*/*.jsonl`."""

    def __init__(self, rng: random.Random, session: str) -> None:
        self.r, self.session, self.rows = rng, session, []
        self.parent: str | None = None
        self.count = 0

    def _uuid(self) -> str:
        h = "".join(self.r.choice("0123456789abcdef") for _ in range(32))
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _row(self, kind: str, message: dict[str, Any], *, side: bool = False) -> None:
        uuid = self._uuid()
        self.rows.append(
            {
                "parentUuid": self.parent,
                "isSidechain": side,
                "userType": "external",
                "cwd": "/home/dev/project",
                "sessionId": self.session,
                "version": "1.0.98",
                "type": kind,
                "message": message,
                "uuid": uuid,
            }
        )
        if not side:
            self.parent = uuid

    def user(self, text: str) -> None:
        self._row("user", {"role": "user", "content": text})

    def turn(
        self, text: str, calls: list[tuple[str, dict[str, Any], str]], *, side: bool = False
    ) -> None:
        """One answer: its text, its tool calls, then each call's result."""
        self.count += 1
        mid = f"msg_{self.session[:8]}{self.count:05d}{'s' if side else ''}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        ids = []
        for name, args, _ in calls:
            ids.append(f"toolu_{self._uuid().replace('-', '')[:24]}")
            blocks.append({"type": "tool_use", "id": ids[-1], "name": name, "input": args})
        for block in blocks:
            message = {"id": mid, "type": "message", "role": "assistant", "content": [block]}
            self._row("assistant", message, side=side)
        for call_id, (_, _, result) in zip(ids, calls, strict=True):
            content = [{"tool_use_id": call_id, "type": "tool_result", "content": result}]
            self._row("user", {"role": "user", "content": content}, side=side)


def _reason(t: Text) -> str:
    return f"{t.sentence()} Next I {t.r.choice(_VERBS)} `{t.path()}`."


def long_outputs(t: Text, cc: ClaudeCode) -> None:
    r = t.r
    cc.user(f"The {t.package} service fails under load: {t.sentence()} Find why and fix it.")
    big: list[Callable[[], tuple[str, dict[str, Any], str]]] = [
        lambda: ("Bash", {"command": f"cat /var/log/{t.package}/app.log"}, t.log(_kb(r))),
        lambda: (
            "Read",
            {"file_path": f"/home/dev/project/{t.path()}"},
            t.numbered(t.module(_kb(r) // 40)),
        ),
        lambda: (
            "Bash",
            {"command": f"curl -s localhost:8080/api/{r.choice(_NOUNS)}s?limit=500"},
            t.json_dump(_kb(r)),
        ),
        lambda: ("Bash", {"command": "find . -type f"}, t.listing(_kb(r))),
        lambda: ("Bash", {"command": "python -m pytest -x -q"}, t.pytest(r.randint(200, 900))),
    ]
    for step in range(r.randint(14, 22)):
        if step % 3 == 1:
            call = r.choice(big)()
        else:
            call = r.choice(
                [
                    (
                        "Grep",
                        {"pattern": r.choice(_NOUNS), "path": "src"},
                        t.grep(2 + r.randrange(11)),
                    ),
                    ("Bash", {"command": "git diff"}, t.diff()),
                    (
                        "Edit",
                        {"file_path": t.path(), "old_string": "x", "new_string": "y"},
                        f"The file {t.path()} has been updated.",
                    ),
                ]
            )
        cc.turn(_reason(t), [call])
    cc.turn(f"Fixed: {t.sentence()}", [])


def _kb(r: random.Random) -> int:
    """20-200 KB, most of them nearer 20."""
    return int(1000 * min(200, 20 * r.paretovariate(1.2)))


def many_small(t: Text, cc: ClaudeCode) -> None:
    r = t.r
    turns = r.randint(2, 4)
    for _ in range(turns):
        cc.user(f"{t.sentence()} Check every caller of `{t.ident()}` in {t.package}.")
        for _ in range(r.randint(70, 120)):
            calls = []
            for _ in range(r.choice([1, 1, 1, 2, 3])):
                tool, new = r.choice(["Read", "Grep", "Bash", "Glob", "Edit"]), t.ident
                args = {
                    "Read": {"file_path": t.path(), "offset": r.randint(1, 400), "limit": 8},
                    "Grep": {"pattern": t.ident(), "path": "src"},
                    "Bash": {"command": f"python -m pytest -q {r.choice(t.tests)} -k {t.ident()}"},
                    "Glob": {"pattern": f"src/**/*{r.choice(_NOUNS)}*.py"},
                    "Edit": {"file_path": t.path(), "old_string": t.ident(), "new_string": new()},
                }[tool]
                calls.append((tool, args, t.small()))
            cc.turn(r.choice(["", t.sentence()]), calls)
        cc.turn(f"Done: {t.sentence()}", [])


def subagents(t: Text, cc: ClaudeCode) -> None:
    r = t.r
    cc.user(f"Audit the {t.package} package: {t.sentence()} Use sub-agents per area.")
    for _ in range(r.randint(8, 14)):
        area = r.choice(t.modules)
        prompt = f"Review `{area}`: {t.sentence(20)} Report files, lines and fixes."
        # The sub-agent's own work, as side-chain records (not the main agent's context).
        for _ in range(r.randint(3, 10)):
            tool = r.choice(["Read", "Grep", "Bash"])
            out = t.small() if r.random() < 0.6 else t.log(r.randint(2000, 12000))
            cc.turn(_reason(t), [(tool, {"file_path": t.path()}, out)], side=True)
        report = t.report(r.randint(3000, 16000))
        task = {"subagent_type": "general-purpose", "description": f"Review {area}"}
        cc.turn(_reason(t), [("Task", {**task, "prompt": prompt}, report)])
        if r.random() < 0.6:
            cc.turn(t.sentence(), [("Read", {"file_path": t.path()}, t.numbered(t.module(60)))])
    cc.turn(f"Audit done: {t.sentence()}", [])


def swe(t: Text, rng: random.Random) -> dict[str, Any]:
    r = t.r
    system = (
        "You are a helpful assistant that can interact multiple times with a computer shell "
        "to solve programming tasks.\nYour response must contain exactly ONE bash code block."
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"<pr_description>\n{t.sentence(30)}\n</pr_description>"},
    ]
    makers: list[Callable[[], tuple[str, str]]] = [
        lambda: (f"grep -rn {r.choice(_NOUNS)} src/", t.grep(r.randint(1, 60))),
        lambda: (f"cat {t.path()}", t.module(r.randint(30, 400))),
        lambda: (f"sed -n 1,80p {t.path()}", t.module(80)),
        lambda: ("python -m pytest -q", t.pytest(r.randint(30, 400))),
        lambda: ("git diff", t.diff()),
        lambda: (f"tail -n 300 /var/log/{t.package}.log", t.log(r.randint(2000, 30000))),
        lambda: ("find . -name '*.py'", t.listing(r.randint(500, 8000))),
        lambda: (f"python reproduce_{t.ident()}.py", t.traceback()),
    ]
    for _ in range(r.randint(30, 60)):
        command, output = r.choice(makers)()
        messages.append(
            {"role": "assistant", "content": f"THOUGHT: {_reason(t)}\n\n```bash\n{command}\n```"}
        )
        messages.append(
            {
                "role": "user",
                "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>",
            }
        )
    messages.append(
        {"role": "assistant", "content": "THOUGHT: done.\n\n```bash\necho COMPLETE\n```"}
    )
    return {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": f"{t.package}-{rng.randint(100, 9999)}",
        "info": {"exit_status": "Submitted", "submission": t.diff()},
        "messages": messages,
    }


def runs(
    seed: int = SEED, count: int = 2, shapes: tuple[str, ...] = SHAPES
) -> Iterator[tuple[str, str]]:
    """Each run's file name and text: `count` runs of each shape, from `seed`."""
    for shape in shapes:
        if shape not in SHAPES:
            raise SystemExit(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
        for number in range(count):
            rng = random.Random(f"{seed}-{shape}-{number}")
            t = Text(rng)
            if shape == "swe":
                name = f"shape-{shape}-{number}.traj.json"
                yield name, json.dumps(swe(t, rng), indent=1)
                continue
            cc = ClaudeCode(rng, f"{rng.getrandbits(64):016x}-{number}")
            {"long-outputs": long_outputs, "many-small": many_small, "subagents": subagents}[shape](
                t, cc
            )
            yield f"shape-{shape}-{number}.jsonl", "".join(json.dumps(x) + "\n" for x in cc.rows)


def write(folder: Path, seed: int = SEED, count: int = 2, shapes: tuple[str, ...] = SHAPES) -> None:
    """Write the runs into `folder` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in runs(seed, count, shapes):
        (folder / name).write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--runs", type=int, default=2, help="runs of each shape")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    args = parser.parse_args()
    write(args.folder, args.seed, args.runs, tuple(args.shapes))
    for path in sorted(args.folder.iterdir()):
        print(f"{path.stat().st_size:>10,}  {path}")


if __name__ == "__main__":
    main()
