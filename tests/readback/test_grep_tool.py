"""Grep: matches with context, caps, skips and time bounds, over real files."""

from __future__ import annotations

import concurrent.futures
import os
import tracemalloc
from pathlib import Path

import pytest
from readback_files import HUGE_SIZE, SECRET

from ctxoffload.readback import FileToolbox

GUARD = 20  # seconds


@pytest.mark.slow
def test_grep_shows_a_window_around_a_match_in_a_50_mb_line(huge_root: Path) -> None:
    result = FileToolbox([huge_root]).grep("NEEDLE", "huge.txt")
    assert result.startswith("huge.txt:1:…")
    assert "NEEDLE" in result
    assert f"[line has {HUGE_SIZE:,} characters; showing" in result
    assert len(result) < 3_000


def test_grep_outputs_path_line_text(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("ERROR", "app.log")
    assert result == "app.log:5:ERROR at 5\napp.log:6:ERROR at 6\napp.log:20:ERROR at 20"


def test_grep_context_lines_and_hunk_separators(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("ERROR", ".", context_lines=1)
    assert result.splitlines() == [
        "app.log-4-line 4",
        "app.log:5:ERROR at 5",
        "app.log:6:ERROR at 6",
        "app.log-7-line 7",
        "--",
        "app.log-19-line 19",
        "app.log:20:ERROR at 20",
        "app.log-21-line 21",
        "--",
        "other.log-1-fine",
        "other.log:2:ERROR here too",
    ]


def test_grep_merges_hunks_whose_context_touches(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("^(ERROR at 6|line 8)$", "app.log", context_lines=1)
    assert result.splitlines() == [
        "app.log-5-ERROR at 5",
        "app.log:6:ERROR at 6",
        "app.log-7-line 7",
        "app.log:8:line 8",
        "app.log-9-line 9",
    ]


def test_grep_caps_matches_and_says_how_to_narrow(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("line", "app.log", max_matches=3)
    lines = result.splitlines()
    assert lines[:3] == ["app.log:1:line 1", "app.log:2:line 2", "app.log:3:line 3"]
    assert lines[3] == (
        "[showing the first 3 matches; more exist: narrow the pattern or path_or_glob, "
        "or raise max_matches]"
    )
    assert len(lines) == 4


def test_grep_with_exactly_max_matches_has_no_cap_note(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("ERROR", "app.log", max_matches=3)
    assert "[" not in result
    assert len(result.splitlines()) == 3


def test_grep_caps_total_output(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text(("z" * 900 + "\n") * 50)
    toolbox = FileToolbox([tmp_path], max_line_chars=1_000, max_output_chars=5_000)
    result = toolbox.grep("z", "wide.txt")
    assert len(result) <= 5_000
    assert result.splitlines()[-1].startswith("[output cap of 5,000 characters reached after")


def test_grep_ignores_case_with_inline_flag(log_root: Path) -> None:
    assert FileToolbox([log_root]).grep("(?i)error here", ".") == "other.log:2:ERROR here too"


def test_grep_reports_an_invalid_regex(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("ERROR(", ".")
    assert result.startswith("Error: invalid regular expression 'ERROR(': missing )")


@pytest.mark.parametrize("pattern", ["\udcff", "ERROR \ud800"], ids=["escaped-byte", "high"])
def test_grep_says_a_pattern_with_a_lone_surrogate_cannot_be_searched_for(
    log_root: Path, pattern: str
) -> None:
    # A model's JSON arguments can spell one ("\\udcff"); RE2 takes only UTF-8.
    result = FileToolbox([log_root]).grep(pattern, ".")
    assert result == (
        f"Error: invalid regular expression {pattern!r}: it holds a lone surrogate "
        f"({pattern[-1]!r}), which no regular expression can search for: leave it out"
    )


def test_grep_with_a_glob_searches_only_matching_files(log_root: Path) -> None:
    (log_root / "nested").mkdir()
    (log_root / "nested" / "deep.log").write_text("ERROR deep\n")
    (log_root / "nested" / "deep.txt").write_text("ERROR txt\n")
    result = FileToolbox([log_root]).grep("ERROR", "**/deep.*")
    assert result == "nested/deep.log:1:ERROR deep\nnested/deep.txt:1:ERROR txt"
    assert FileToolbox([log_root]).grep("ERROR", "nested/*.log") == "nested/deep.log:1:ERROR deep"


def test_grep_recursion_skips_symlinks_out_and_says_so(toolbox: FileToolbox) -> None:
    result = toolbox.grep("SECRET|alpha|delta", ".")
    assert SECRET not in result
    assert result.splitlines() == [
        "link_in:1:alpha",
        "notes.txt:1:alpha",
        "sub/deep.txt:1:delta",
        "[2 symlink(s) pointing outside the allowed roots skipped]",
    ]


def test_grep_skips_binary_files_and_fifos_in_a_directory(log_root: Path) -> None:
    (log_root / "blob.bin").write_bytes(b"ERROR\x00\x01")
    os.mkfifo(log_root / "pipe")
    result = FileToolbox([log_root]).grep("ERROR here", ".")
    assert result == "other.log:2:ERROR here too\n[1 binary file(s) skipped]"


def test_grep_on_one_binary_file_is_an_error(log_root: Path) -> None:
    (log_root / "blob.bin").write_bytes(b"ERROR\x00\x01")
    assert (
        FileToolbox([log_root])
        .grep("ERROR", "blob.bin")
        .startswith("Error: 'blob.bin' is a binary file")
    )


def test_grep_without_matches_says_what_was_searched(log_root: Path) -> None:
    result = FileToolbox([log_root]).grep("nothing like this", ".")
    assert result == "No matches for 'nothing like this' in '.' (2 file(s) searched)."


def test_grep_matches_non_utf8_lines(tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_bytes(b"caf\xe9 ERROR\nplain\n")
    assert FileToolbox([tmp_path]).grep("ERROR", ".") == "mixed.txt:1:caf\ufffd ERROR"


def test_grep_in_process_gives_the_same_result_as_the_worker(log_root: Path) -> None:
    bounded = FileToolbox([log_root]).grep("ERROR", ".", context_lines=2, max_matches=3)
    unbounded = FileToolbox([log_root], grep_timeout=None).grep(
        "ERROR", ".", context_lines=2, max_matches=3
    )
    assert bounded == unbounded


def test_grep_runs_a_catastrophic_regex_in_linear_time(tmp_path: Path) -> None:
    # (a+)+$ backtracks exponentially in Python's re; in RE2 it is one linear pass.
    (tmp_path / "a_good.txt").write_text("aaa\n")
    (tmp_path / "b_evil.txt").write_text("a" * 40 + "b\n")
    result = FileToolbox([tmp_path], grep_timeout=None).grep("(a+)+$", ".")
    assert result == "a_good.txt:1:aaa"


def test_nested_groups_in_a_pattern_cost_nothing_per_match(tmp_path: Path) -> None:
    # 8,000 nested groups around `a`: RE2 worked out every group of every match, O(groups²)
    # a line: 35-70 s for these 50 lines, in one piece, past any grep_timeout. Groups are
    # only groups now (no pattern of a model's is read for its groups): a millisecond.
    (tmp_path / "t.txt").write_text("a line\n" * 50)
    pattern = "(" * 8000 + "a" + ")" * 8000
    toolbox = FileToolbox([tmp_path], grep_timeout=5)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # A guard, far above the milliseconds it takes: a regression fails instead of hanging.
        result = pool.submit(toolbox.grep, pattern, "t.txt").result(timeout=GUARD)
    assert result.splitlines()[:50] == [f"t.txt:{i}:a line" for i in range(1, 51)]


def test_grep_stops_at_its_time_limit_and_keeps_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "a_good.txt").write_text("needle\n")
    # 3 million lines that never match, each judged on its own (a pattern that reads the
    # start of the text is searched line by line): seconds of work, where listing two files
    # takes well under the 50 ms limit. (Lines searched a piece at a time take milliseconds.)
    (tmp_path / "b_big.txt").write_text("needle in hay\n" * 3_000_000)
    result = FileToolbox([tmp_path], grep_timeout=0.05).grep(r"\Aneedle$", ".", context_lines=1)
    lines = result.splitlines()
    assert lines[0].startswith("Error: Grep stopped after its time limit of 0.05 s while")
    assert "narrower path_or_glob" in lines[0]


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", "(?=a)", "(?<!a)b"], ids=["backreference", "lookahead", "lookbehind"]
)
def test_grep_explains_re2_syntax_it_does_not_support(log_root: Path, pattern: str) -> None:
    result = FileToolbox([log_root]).grep(pattern, ".")
    assert result.startswith(f"Error: invalid regular expression {pattern!r}")
    assert "not supported" in result


def test_grep_over_a_glob_skips_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / "app.log").write_text("ERROR one\n")
    result = FileToolbox([tmp_path], grep_timeout=None).grep("ERROR", "*.log")
    assert result == "app.log:1:ERROR one\n[1 pipe(s), socket(s) or device(s) skipped]"


def test_grep_with_a_huge_context_keeps_memory_bounded(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_text(("x" * 99 + "\n") * 200_000)  # 20 MB, every line matches
    toolbox = FileToolbox([tmp_path], max_output_chars=20_000, grep_timeout=None)
    tracemalloc.start()
    try:
        result = toolbox.grep("x", "big.log", context_lines=10**9, max_matches=10**9)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(result) <= 20_000
    assert "[output cap of 20,000 characters reached" in result
    assert peak < 5_000_000
