"""The reader of the docs' code blocks (tests/docs/blocks.py) reads what the pages hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from blocks import blocks, matches


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_blocks_carry_their_annotations_and_outputs(tmp_path: Path) -> None:
    found = blocks(
        page(
            tmp_path,
            "# Title\n\n```python\nprint('a')\n```\n<!-- test: output -->\n```text\na\n```\n\n"
            "<!-- test: skip -- needs a GPU -->\n```python\nimport torch\n```\n\n"
            "<!-- test: server -->\n```python\nprint(x)\n```\n"
            "````console\n$ ctxoffload ls\n````\n",
        )
    )
    assert [(b.language, b.annotations) for b in found] == [
        ("python", {}),
        ("python", {"skip": "needs a GPU"}),
        ("python", {"server": ""}),
        ("console", {}),
    ]
    assert found[0].code == "print('a')\n" and found[0].output is not None
    assert found[0].output.code == "a\n"
    assert found[3].code == "$ ctxoffload ls\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- test: skip -->\n```python\nx\n```\n", "needs '-- the reason'"),
        ("<!-- test: maybe -->\n```python\nx\n```\n", "unknown annotation"),
        ("<!-- test: skip -- why -->\nprose\n```python\nx\n```\n", "right before a fence"),
        ("```text\nx\n```\n<!-- test: output -->\n```text\ny\n```\n", "must follow a Python"),
        ("```python\nx\n", "never closed"),
        ("<!-- test: continues -->\n```python\nx\n```\n", "runs alone, as a reader copies"),
    ],
)
def test_a_page_the_tests_cannot_read_right_is_an_error(
    tmp_path: Path, text: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        blocks(page(tmp_path, text))


@pytest.mark.parametrize(
    ("expected", "actual", "fits"),
    [
        ("a\nb\n", "a\nb\n", True),
        ("a\nb\n", "a\nc\n", False),
        ("a\n...\nd\n", "a\nb\nc\nd\n", True),
        ("a\n...\nd\n", "a\nd\n", True),
        ("a\n...\n", "a\n", True),
        ("took ... ms\n", "took 12 ms\n", True),
        ("took ... ms\n", "took 12 s\n", False),
        ("a\n", "a\nb\n", False),
    ],
)
def test_expected_output_fits_with_ellipses(expected: str, actual: str, fits: bool) -> None:
    assert matches(expected, actual) is fits
