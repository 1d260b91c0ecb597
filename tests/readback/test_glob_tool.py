"""Glob: sorted paths, wildcards, caps and refusals."""

from __future__ import annotations

from pathlib import Path

from ctxoffload.readback import FileToolbox


def test_glob_lists_sorted_relative_paths(toolbox: FileToolbox) -> None:
    assert toolbox.glob("**/*.txt") == "notes.txt\nsub/deep.txt"


def test_glob_marks_directories_and_skips_symlinks_out(toolbox: FileToolbox) -> None:
    assert toolbox.glob("*").splitlines() == [
        "link_in",
        "notes.txt",
        "sub/",
        "[3 symlink(s) pointing outside the allowed roots skipped]",
    ]


def test_glob_accepts_absolute_patterns_inside_the_root(toolbox: FileToolbox, root: Path) -> None:
    assert toolbox.glob(f"{root}/sub/*.txt") == "sub/deep.txt"


def test_glob_character_classes_and_question_mark(root: Path, toolbox: FileToolbox) -> None:
    for name in ("r1.log", "r2.log", "r3.log", "rx.log"):
        (root / name).write_text("")
    assert toolbox.glob("r[12].log") == "r1.log\nr2.log"
    assert toolbox.glob("r[!12].log") == "r3.log\nrx.log"
    assert toolbox.glob("r?.log") == "r1.log\nr2.log\nr3.log\nrx.log"


def test_glob_caps_the_number_of_paths(tmp_path: Path) -> None:
    for n in range(30):
        (tmp_path / f"f{n:02d}.txt").write_text("")
    result = FileToolbox([tmp_path], max_glob_paths=10).glob("*.txt")
    lines = result.splitlines()
    assert lines[:10] == [f"f{n:02d}.txt" for n in range(10)]
    assert lines[10] == "[showing 10 of 30 paths; narrow the pattern]"


def test_glob_refuses_dotdot_after_a_wildcard(toolbox: FileToolbox) -> None:
    assert toolbox.glob("*/../../*").startswith("Error: '..' may appear only before")


def test_glob_without_matches(toolbox: FileToolbox) -> None:
    assert toolbox.glob("*.nothing") == "No paths match '*.nothing'."


def test_glob_with_an_inverted_range_is_an_error(root: Path) -> None:
    result = FileToolbox([root]).glob("[z-a]*")
    assert result.startswith("Error: invalid glob '[z-a]*'")
    assert FileToolbox([root]).grep("x", "sub/[z-a]*").startswith("Error: invalid glob")


def test_an_invalid_glob_is_an_error_where_its_folder_does_not_exist(tmp_path: Path) -> None:
    result = FileToolbox([tmp_path / "not-yet"]).glob("[z-a]*")
    assert result.startswith("Error: invalid glob '[z-a]*'")
    assert FileToolbox([tmp_path]).glob("missing/[z-a]*").startswith("Error: invalid glob")
