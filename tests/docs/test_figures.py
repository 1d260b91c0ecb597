"""Measured figures have one home, docs/benchmarks.md, which says where and how each was
measured: another page that quotes one agrees with it, and how long the test suite takes is
measured there alone (another page may say it only beside a link there, with its figures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from blocks import ROOT

BENCHMARKS = ROOT / "docs" / "benchmarks.md"

# A measured figure: a ratio, a time, a share (`0.73–1.21×`, `3.017 s`, `95 ms`, `92.8%`).
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_FIGURE = re.compile(rf"(?<![\w.]){_NUMBER}(?:–{_NUMBER})?(?:×| ?ms\b| ?%| s\b| min\b)")
_DURATION = re.compile(rf"(?<![\w.]){_NUMBER}(?:–{_NUMBER})? ?(?:s|min|minutes|seconds)\b")
# "slow" as the tests marked slow, not a slow client or a slow moment.
_ABOUT_THE_SUITE = re.compile(r"\bsuite\b|`slow`|\bslow: |\bslow tests?\b", re.I)
_FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)


def other_pages() -> list[Path]:
    """The Markdown a reader meets besides the benchmarks page (the changelog is history)."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages if p.name not in {"benchmarks.md", "changelog.md"}]


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a text (blank-line separated), code blocks left out."""
    return [p.strip() for p in re.split(r"\n\s*\n", _FENCED.sub("", text)) if p.strip()]


def figures(text: str) -> list[str]:
    return [match.group(0) for match in _FIGURE.finditer(text)]


def where(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_figures_quoted_from_the_benchmarks_are_the_benchmarks_figures() -> None:
    """A paragraph that names a bench/ script or links the benchmarks page quotes its
    figures as that page gives them, so the two cannot drift apart."""
    measured = set(figures(BENCHMARKS.read_text(encoding="utf-8")))
    stray = [
        f"{where(page)}: {figure}"
        for page in other_pages()
        for paragraph in paragraphs(page.read_text(encoding="utf-8"))
        if "bench/" in paragraph or "benchmarks.md" in paragraph
        for figure in figures(paragraph)
        if figure not in measured
    ]
    assert not stray, "figures that docs/benchmarks.md does not give: " + ", ".join(stray)


@pytest.mark.parametrize(
    "path",
    [*other_pages(), ROOT / "tests" / "conftest.py", ROOT / "pyproject.toml"],
    ids=where,
)
def test_how_long_the_suite_takes_is_stated_on_the_benchmarks_page_only(path: Path) -> None:
    stated = [
        " ".join(paragraph.split())[:160]
        for paragraph in paragraphs(path.read_text(encoding="utf-8"))
        if _ABOUT_THE_SUITE.search(paragraph)
        and _DURATION.search(paragraph)
        and "benchmarks.md" not in paragraph
    ]
    assert not stated, (
        f"{where(path)} states how long tests take; say it in docs/benchmarks.md "
        f"(the test suite) and link there: {stated}"
    )


def test_the_figure_finders_read_figures() -> None:
    assert figures("0.73–1.21× the first, 3.017 s, 95 ms, 92.8% and 1,000 lines") == [
        "0.73–1.21×",
        "3.017 s",
        "95 ms",
        "92.8%",
    ]
    assert _DURATION.search("it takes about 80 s") and not _DURATION.search("in 2 steps")
    assert _ABOUT_THE_SUITE.search("the tests marked `slow` take 20 s")
    assert not _ABOUT_THE_SUITE.search("a slow client is cut off after 10 s")
    assert paragraphs("a\n\n```text\n1 s\n```\n\nb\n") == ["a", "b"]


def count_test_functions() -> int:
    """How many test functions tests/ holds, counted from the source (no collection)."""
    import ast

    return sum(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
        for path in (ROOT / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )


@pytest.mark.slow
def test_the_suite_figures_are_of_a_suite_this_size() -> None:
    """The benchmarks page states how many test functions its latest figures are of; once
    the suite holds a tenth more or fewer, those figures are of another suite: measure
    again and say so there."""
    stated = re.search(
        r"\*\*Now\*\*: ([\d,]+) tests with the corpus, from ([\d,]+) test functions",
        BENCHMARKS.read_text(encoding="utf-8"),
    )
    assert stated, "docs/benchmarks.md (the test suite) states no current size"
    written, counted = int(stated.group(2).replace(",", "")), count_test_functions()
    assert abs(counted - written) <= written / 10, (
        f"docs/benchmarks.md gives figures of a suite of {written:,} test functions; tests/ "
        f"holds {counted:,}: count the tests (python -m pytest --collect-only -q), time a "
        "run, and write both under 'The test suite'"
    )
