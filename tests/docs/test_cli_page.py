"""docs/cli.md against each command's `--help`, so the page and the command cannot drift.

The page has one `## ` section per command, in the order `ctxoffload --help` lists them;
each opens with a ```` ```text ```` block holding the usage `ctxoffload COMMAND --help`
prints (compared with whitespace collapsed, as the terminal's width wraps it); its prose
names every option `--help` lists, and names no option as `` `-x`` or `` `--name`` that the
command lacks. `-h` / `--help`, which every command has, is named once in the page's
introduction. (Examples in console blocks are not read here: the console runner checks
those by running them.)
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from blocks import ROOT

from ctxoffload.cli import main

PAGE = ROOT / "docs" / "cli.md"

_HEADING = re.compile(r"^## (.+?)\s*$")
_FENCE = re.compile(r"^(`{3,}|~{3,})(\w*)")
# An option as the prose names it: at the start of a code span (`--lines A:B`, `-C N`).
_NAMED_OPTION = re.compile(r"`(--?[A-Za-z][\w-]*)")
# An option in the options list of `--help`: `  -C N, --context N   N lines around`.
_HELP_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_HELP_FLAGS = frozenset({"-h", "--help"})


def help_text(*args: str) -> str:
    """What `ctxoffload ARGS --help` prints."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*args, "--help"]) == 0
    return out.getvalue()


def commands() -> list[str]:
    """The commands in the order `ctxoffload --help` lists them."""
    text = help_text()
    listing = text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    return re.findall(r"^    ([\w-]+)(?:\s|$)", listing, flags=re.MULTILINE)


def usage(text: str) -> str:
    """The usage of a help text, on one line."""
    return " ".join(text.split("\n\n", 1)[0].split())


def help_options(text: str) -> set[str]:
    """Every option string the options section of a help text lists."""
    section = text.split("\noptions:\n", 1)[1]
    found: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("  -"):
            continue
        # The option strings end where two spaces begin the help (or at the end of the line).
        invocation = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        found.update(_HELP_OPTION.findall(invocation.split(" {", 1)[0]))
    return found


@dataclass
class Section:
    """A `## ` section of the page: its heading, its prose, and its fenced blocks."""

    heading: str
    prose: list[str] = field(default_factory=list)
    fences: list[tuple[str, str]] = field(default_factory=list)  # (language, text)


def read_page(path: Path) -> tuple[Section, list[Section]]:
    """The introduction (before the first `## `) and the sections of a page."""
    intro = Section("")
    sections: list[Section] = []
    fence: tuple[str, str, list[str]] | None = None  # marker, language, lines
    for line in path.read_text(encoding="utf-8").splitlines():
        current = sections[-1] if sections else intro
        if fence is not None:
            if line.strip() == fence[0]:
                current.fences.append((fence[1], "\n".join(fence[2])))
                fence = None
            else:
                fence[2].append(line)
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = (opened.group(1), opened.group(2), [])
            continue
        heading = _HEADING.match(line)
        if heading:
            sections.append(Section(heading.group(1).strip("`")))
        else:
            current.prose.append(line)
    return intro, sections


def problems(path: Path) -> list[str]:
    """Where a CLI page and the commands' `--help` disagree."""
    intro, sections = read_page(path)
    found: list[str] = []
    expected = commands()
    if [s.heading for s in sections] != expected:
        found.append(f"sections {[s.heading for s in sections]}, expected {expected}")
    if not set(_NAMED_OPTION.findall("\n".join(intro.prose))) >= _HELP_FLAGS:
        found.append("the introduction does not name `-h` and `--help`")
    for section in sections:
        if section.heading not in expected:
            continue
        text = help_text(section.heading)
        first = section.fences[0] if section.fences else ("", "")
        if first[0] != "text" or " ".join(first[1].split()) != usage(text):
            found.append(f"{section.heading}: the first block is not the usage: {usage(text)}")
        options = help_options(text) - _HELP_FLAGS
        named = set(_NAMED_OPTION.findall("\n".join(section.prose)))
        for option in sorted(options - named):
            found.append(f"{section.heading}: option {option} is not named")
        for option in sorted(named - options - _HELP_FLAGS):
            found.append(f"{section.heading}: option {option} is named, but it has none")
    return found


def test_the_cli_page_matches_every_command_help() -> None:
    assert problems(PAGE) == []


def test_the_commands_are_read_from_the_help() -> None:
    listed = commands()
    assert listed[:3] == ["demo", "ls", "show"] and len(listed) == 19
    assert "mcp-proxy" in listed  # a name with a hyphen is read whole
    assert help_options(help_text("grep")) >= {"-C", "--context", "-i", "--timeout", "--json"}
    assert "--format" in help_options(help_text("replay"))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("- `--full`:", "- `--fuller`:"), "show: option --fuller is named, but it has none"),
        (("- `--full`:", "- full:"), "show: option --full is not named"),
        (("[--step N] [--full]", "[--full] [--step N]"), "show: the first block is not"),
        (("## `stats`", "## `statistics`"), "sections ["),
        (("Every command takes `-h` / `--help`", "Every command takes"), "the introduction"),
    ],
)
def test_a_page_that_drifts_from_the_help_is_caught(
    tmp_path: Path, change: tuple[str, str], problem: str
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert change[0] in text
    page = tmp_path / "cli.md"
    page.write_text(text.replace(change[0], change[1], 1), encoding="utf-8")
    assert any(problem in p for p in problems(page)), problems(page)
