"""Read: numbered lines, pages, caps and refusals, over real files."""

from __future__ import annotations

import os
import tracemalloc
import typing
from pathlib import Path

import pytest
from readback_files import HUGE_SIZE, REST

from ctxoffload.readback import FileToolbox


def test_read_numbers_lines_like_cat_n(toolbox: FileToolbox) -> None:
    assert toolbox.read("notes.txt") == "     1\talpha\n     2\tbeta\n     3\tgamma"


def test_read_pages_with_offset_limit_and_footer(root: Path, toolbox: FileToolbox) -> None:
    (root / "hundred.txt").write_text("".join(f"row {n}\n" for n in range(1, 101)))
    result = toolbox.read("hundred.txt", offset=11, limit=10)
    lines = result.splitlines()
    assert lines[0] == "    11\trow 11"
    assert lines[9] == "    20\trow 20"
    assert lines[10] == "… lines 11–20 of 100 shown; call Read with offset=21 to continue"
    assert len(lines) == 11


def test_read_has_no_footer_on_the_last_page(root: Path, toolbox: FileToolbox) -> None:
    (root / "hundred.txt").write_text("".join(f"row {n}\n" for n in range(1, 101)))
    result = toolbox.read("hundred.txt", offset=91, limit=50)
    assert result.splitlines()[-1] == "   100\trow 100"
    assert "…" not in result


def test_read_counts_a_last_line_without_newline(root: Path, toolbox: FileToolbox) -> None:
    (root / "open_end.txt").write_text("one\ntwo\nthree")
    assert toolbox.read("open_end.txt", limit=2).endswith(
        "lines 1–2 of 3 shown; call Read with offset=3 to continue"
    )
    assert toolbox.read("open_end.txt", offset=3) == "     3\tthree"


def test_read_strips_crlf_line_endings(root: Path, toolbox: FileToolbox) -> None:
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    assert toolbox.read("dos.txt") == "     1\tone\n     2\ttwo"


def test_read_cuts_long_lines_and_says_how_much(root: Path) -> None:
    (root / "wide.txt").write_text("x" * 250 + "\nshort\n")
    result = FileToolbox([root], max_line_chars=100).read("wide.txt")
    first, second = result.splitlines()
    cut = "… [line cut: 150 more characters]" + REST.format(1, 100)
    assert first == "     1\t" + "x" * 100 + cut
    assert second == "     2\tshort"


def test_read_cut_count_is_in_characters_not_bytes(root: Path) -> None:
    (root / "accents.txt").write_text("é" * 150 + "\r\n", encoding="utf-8")
    result = FileToolbox([root], max_line_chars=100).read("accents.txt")
    cut = "… [line cut: 50 more characters]" + REST.format(1, 100)
    assert result == "     1\t" + "é" * 100 + cut


def test_read_caps_total_output_and_continues_where_it_stopped(root: Path) -> None:
    (root / "big.txt").write_text("".join(f"{n:04d}" + "y" * 996 + "\n" for n in range(1, 101)))
    toolbox = FileToolbox([root], max_line_chars=1_000, max_output_chars=5_000)
    result = toolbox.read("big.txt", offset=1, limit=100)
    assert len(result) <= 5_000
    footer = result.splitlines()[-1]
    shown = len(result.splitlines()) - 1
    assert footer == (
        f"… lines 1–{shown} of 100 shown (output size cap reached); "
        f"call Read with offset={shown + 1} to continue"
    )
    following = toolbox.read("big.txt", offset=shown + 1, limit=1)
    assert following.startswith(f"{shown + 1:>6}\t{shown + 1:04d}yyy")


def test_read_replaces_undecodable_bytes(root: Path, toolbox: FileToolbox) -> None:
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1") + b"ok\n")
    assert toolbox.read("latin1.txt") == "     1\tcaf\ufffd\n     2\tok"


def test_read_refuses_binary_files_with_a_message(root: Path, toolbox: FileToolbox) -> None:
    # (An image is shown as an image: tests/agent/test_image_reading.py.)
    (root / "archive.zip").write_bytes(b"PK\x03\x04\x00\x00ZIPHEADER" + bytes(range(256)))
    result = toolbox.read("archive.zip")
    assert isinstance(result, str)
    assert result.startswith("Error: 'archive.zip' is a binary file")
    assert "ZIPHEADER" not in result


@pytest.mark.parametrize(
    ("offset", "limit", "message"),
    [
        (0, 10, "offset=0 must be at least 1"),
        (1, 0, "limit=0 must be at least 1"),
        ("abc", 10, "offset='abc' is not a whole number"),
        (50, 10, "offset=50 is past the end of 'notes.txt', which has 3 lines"),
    ],
)
def test_read_reports_bad_offsets(
    toolbox: FileToolbox, offset: typing.Any, limit: typing.Any, message: str
) -> None:
    assert toolbox.read("notes.txt", offset, limit).startswith(f"Error: {message}")


def test_read_accepts_numbers_sent_as_strings(toolbox: FileToolbox) -> None:
    assert toolbox.read("notes.txt", "2", "1") == (  # type: ignore[arg-type]
        "     2\tbeta\n… lines 2–2 of 3 shown; call Read with offset=3 to continue"
    )


def test_read_empty_file(root: Path, toolbox: FileToolbox) -> None:
    (root / "empty.txt").write_text("")
    assert toolbox.read("empty.txt") == "empty.txt is empty (0 lines)."


def test_read_directory_and_missing_file_are_errors(toolbox: FileToolbox) -> None:
    assert toolbox.read("sub").startswith("Error: 'sub' is a directory: call Glob with 'sub/*'")
    assert toolbox.read("nope.txt").startswith("Error: no such file: 'nope.txt'")


def test_read_refuses_a_fifo_instead_of_blocking(root: Path, toolbox: FileToolbox) -> None:
    os.mkfifo(root / "pipe")
    assert toolbox.read("pipe").startswith("Error: 'pipe' is not a regular file")


def test_read_streams_a_50_mb_line_in_bounded_memory(huge_root: Path) -> None:
    toolbox = FileToolbox([huge_root])
    tracemalloc.start()
    try:
        result = toolbox.read("huge.txt", limit=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000  # the file is 50 MB; reading it whole would exceed this
    first, footer = result.splitlines()
    assert (
        first
        == "     1\t"
        + "x" * 2_000
        + f"… [line cut: {HUGE_SIZE - 2_000:,} more characters]"
        + REST.format(1, 2000)
    )
    assert footer == "… lines 1–1 of 2 shown; call Read with offset=2 to continue"
