"""Read, Grep and Glob over real directories, symlinks and files."""

from __future__ import annotations

import inspect
import os
import tracemalloc
import typing
from pathlib import Path

import pytest

from ctxoffload import DataBlock, TextBlock
from ctxoffload.exceptions import ConfigError, ToolError
from ctxoffload.offloader import FileToolbox, resolve_in_roots, workspace_tools

SECRET = "TOP SECRET outside the workspace"


# The end of a cut line tells the model how to read the rest.
REST = " (Read offset={} char_offset={} shows the rest)"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with text files and symlinks, next to directories it must not reach."""
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    # A sibling whose name starts with the root's name: a string-prefix check would let it in.
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "secret.txt").write_text(SECRET + "\n")
    (workspace / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (workspace / "sub" / "deep.txt").write_text("delta\n")
    (workspace / "link_out").symlink_to(outside / "secret.txt")
    (workspace / "link_dir_out").symlink_to(outside, target_is_directory=True)
    (workspace / "chain").symlink_to(workspace / "link_out")
    (workspace / "sub" / "link_up").symlink_to(Path("..", "..", "outside"))
    (workspace / "link_in").symlink_to(workspace / "notes.txt")
    return workspace


@pytest.fixture
def toolbox(root: Path) -> FileToolbox:
    return FileToolbox([root])


HOSTILE_PATHS = [
    "../outside/secret.txt",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "sub/../../outside/secret.txt",
    "./../outside/secret.txt",
    "..",
    "/",
    "link_out",
    "link_dir_out/secret.txt",
    "chain",
    "sub/link_up/secret.txt",
    "../ws2/secret.txt",
    "sub/../../ws/../outside/secret.txt",
    "{outside}/secret.txt",
    "{root}/../outside/secret.txt",
    "{root}2/secret.txt",
]


def _hostile(template: str, root: Path) -> str:
    return template.format(root=root, outside=root.parent / "outside")


# -- confinement -----------------------------------------------------------------------------


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_resolve_in_roots_refuses_escapes(root: Path, template: str) -> None:
    with pytest.raises(ToolError, match="outside the allowed roots") as caught:
        resolve_in_roots(_hostile(template, root), [root])
    assert str(root.resolve()) in str(caught.value)


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_read_returns_error_text_for_escapes(
    toolbox: FileToolbox, root: Path, template: str
) -> None:
    result = toolbox.read(_hostile(template, root))
    assert result.startswith("Error:")
    assert str(root.resolve()) in result
    assert SECRET not in result


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_grep_returns_error_text_for_escapes(
    toolbox: FileToolbox, root: Path, template: str
) -> None:
    result = toolbox.grep("SECRET", _hostile(template, root))
    assert result.startswith("Error:")
    assert SECRET not in result


def test_resolve_in_roots_accepts_paths_inside(root: Path) -> None:
    notes = (root / "notes.txt").resolve()
    assert resolve_in_roots("notes.txt", [root]) == notes
    assert resolve_in_roots(str(notes), [root]) == notes
    assert resolve_in_roots("sub/../notes.txt", [root]) == notes
    assert resolve_in_roots(f"{root}/../ws/notes.txt", [root]) == notes
    assert resolve_in_roots(".", [root]) == root.resolve()
    assert resolve_in_roots("not-yet-written.txt", [root]) == root.resolve() / "not-yet-written.txt"


def test_resolve_in_roots_follows_symlinks_that_stay_inside(root: Path) -> None:
    assert resolve_in_roots("link_in", [root]) == (root / "notes.txt").resolve()


def test_resolve_in_roots_refuses_nul_byte(root: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_roots("notes.txt\0../../etc/passwd", [root])


def test_resolve_in_roots_needs_a_root() -> None:
    with pytest.raises(ToolError, match="no roots"):
        resolve_in_roots("notes.txt", [])


def test_absolute_path_in_a_second_root_is_allowed(root: Path) -> None:
    other = root.parent / "outside"
    toolbox = FileToolbox([root, other])
    assert SECRET in toolbox.read(str(other / "secret.txt"))
    # Relative paths still start at the first root only.
    assert toolbox.read("secret.txt").startswith("Error: no such file")


def test_symlink_loop_is_an_error_not_a_hang(root: Path) -> None:
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    assert FileToolbox([root]).read("loop_a").startswith("Error:")


# -- Read ------------------------------------------------------------------------------------


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


# -- a 50 MB single line ---------------------------------------------------------------------

HUGE_SIZE = 50_000_000


@pytest.fixture(scope="module")
def huge_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding one 50 MB line with a needle in the middle, and a short second line."""
    root = tmp_path_factory.mktemp("huge")
    half = (HUGE_SIZE - len("NEEDLE")) // 2
    with (root / "huge.txt").open("wb") as file:
        file.write(b"x" * half + b"NEEDLE" + b"x" * (HUGE_SIZE - half - len("NEEDLE")))
        file.write(b"\nsecond line\n")
    return root


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


def test_grep_shows_a_window_around_a_match_in_a_50_mb_line(huge_root: Path) -> None:
    result = FileToolbox([huge_root]).grep("NEEDLE", "huge.txt")
    assert result.startswith("huge.txt:1:…")
    assert "NEEDLE" in result
    assert f"[line has {HUGE_SIZE:,} characters; showing" in result
    assert len(result) < 3_000


# -- Grep ------------------------------------------------------------------------------------


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    root.mkdir()
    lines = [f"line {n}" for n in range(1, 31)]
    for n in (5, 6, 20):
        lines[n - 1] = f"ERROR at {n}"
    (root / "app.log").write_text("\n".join(lines) + "\n")
    (root / "other.log").write_text("fine\nERROR here too\n")
    return root


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


def test_grep_stops_at_its_time_limit_and_keeps_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "a_good.txt").write_text("needle\n")
    (tmp_path / "b_big.txt").write_text("hay\n" * 3_000_000)
    result = FileToolbox([tmp_path], grep_timeout=0.01).grep("needle", ".")
    lines = result.splitlines()
    assert lines[0].startswith("Error: Grep stopped after its time limit of 0.01 s while")
    assert "narrower path_or_glob" in lines[0]


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", "(?=a)", "(?<!a)b"], ids=["backreference", "lookahead", "lookbehind"]
)
def test_grep_explains_re2_syntax_it_does_not_support(log_root: Path, pattern: str) -> None:
    result = FileToolbox([log_root]).grep(pattern, ".")
    assert result.startswith(f"Error: invalid regular expression {pattern!r}")
    assert "not supported" in result


# -- Glob ------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("pattern", ["../*", "../outside/*", "/etc/*", "/*", "link_dir_out/*"])
def test_glob_refuses_patterns_outside_the_roots(toolbox: FileToolbox, pattern: str) -> None:
    result = toolbox.glob(pattern)
    assert result.startswith("Error:")
    assert "secret" not in result


@pytest.mark.parametrize("pattern", ["../outside/*", "/etc/pass*", "link_dir_out/*.txt"])
def test_grep_refuses_globs_outside_the_roots(toolbox: FileToolbox, pattern: str) -> None:
    result = toolbox.grep("SECRET", pattern)
    assert result.startswith("Error:")
    assert SECRET not in result


def test_glob_refuses_dotdot_after_a_wildcard(toolbox: FileToolbox) -> None:
    assert toolbox.glob("*/../../*").startswith("Error: '..' may appear only before")


def test_glob_without_matches(toolbox: FileToolbox) -> None:
    assert toolbox.glob("*.nothing") == "No paths match '*.nothing'."


# -- the agent-facing functions --------------------------------------------------------------


class _Workspace:
    """Stands in for LocalWorkspace: all workspace_tools uses is `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir


async def test_workspace_tools_are_named_typed_and_documented(root: Path) -> None:
    tools = workspace_tools(_Workspace(root))
    assert [tool.__name__ for tool in tools] == ["Read", "Grep", "Glob"]
    for tool in tools:
        assert inspect.iscoroutinefunction(tool)
        assert "Args:" in (tool.__doc__ or "")
    read, grep, glob = tools
    assert typing.get_type_hints(read) == {
        "path": str,
        "offset": int,
        "limit": int,
        "char_offset": int,
        "return": str | list[TextBlock | DataBlock],
    }
    assert typing.get_type_hints(grep) == {
        "pattern": str,
        "path_or_glob": str,
        "context_lines": int,
        "max_matches": int,
        "return": str,
    }
    assert inspect.signature(read).parameters["limit"].default == 200
    assert await read("notes.txt", 2, 1) == (
        "     2\tbeta\n… lines 2–2 of 3 shown; call Read with offset=3 to continue"
    )
    assert await grep("gamma", "notes.txt") == "notes.txt:3:gamma"
    assert await glob("sub/*.txt") == "sub/deep.txt"


async def test_workspace_tools_accept_a_directory_or_a_list(root: Path) -> None:
    for given in (root, str(root), [root, root.parent / "outside"]):
        read, _, _ = workspace_tools(given)
        assert (await read("notes.txt")).startswith("     1\talpha")


async def test_workspace_tools_pass_caps_through(root: Path) -> None:
    (root / "wide.txt").write_text("w" * 300 + "\n")
    read, _, _ = workspace_tools(root, max_line_chars=100, max_output_chars=1_000)
    cut = "… [line cut: 200 more characters]" + REST.format(1, 100)
    assert await read("wide.txt") == "     1\t" + "w" * 100 + cut


@pytest.mark.parametrize(
    "caps",
    [
        {"max_line_chars": 0},
        {"max_line_chars": 2_000, "max_output_chars": 2_100},
        {"max_glob_paths": 0},
        {"grep_timeout": 0},
    ],
)
def test_impossible_caps_are_config_errors(tmp_path: Path, caps: dict[str, typing.Any]) -> None:
    with pytest.raises(ConfigError):
        FileToolbox([tmp_path], **caps)


def test_toolbox_needs_a_root() -> None:
    with pytest.raises(ConfigError, match="at least one root"):
        FileToolbox([])


def test_reference_relative_to_the_current_directory_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A LocalWorkspace with a relative workdir returns references like
    # "agent_workspace/sessions/s/tool_result-x.txt"; the tools must open those as given.
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "agent_workspace" / "sessions" / "s" / "tool_result-x.txt"
    target.parent.mkdir(parents=True)
    target.write_text("alpha\nERROR beta\n")
    roots = ["agent_workspace"]
    assert resolve_in_roots("agent_workspace/sessions/s/tool_result-x.txt", roots) == target
    assert resolve_in_roots("sessions/s/tool_result-x.txt", roots) == target
    with pytest.raises(ToolError):
        resolve_in_roots("../outside.txt", roots)


# -- reads that a race, a hard link, a FIFO or a pattern cannot subvert ----------------------

_SWAPPER = """
import os, sys, time
victim, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
link, plain = victim + ".link", victim + ".plain"
end = time.monotonic() + seconds
print("ready", flush=True)
while time.monotonic() < end:
    os.symlink(outside, link)
    os.rename(link, victim)
    time.sleep(0.0005)
    with open(plain, "w") as file:
        file.write("harmless line\\n")
    os.rename(plain, victim)
    time.sleep(0.0005)
"""


def test_a_file_swapped_for_an_outside_symlink_is_never_read(root: Path) -> None:
    import subprocess
    import sys
    import time

    victim = root / "sub" / "victim.txt"
    victim.write_text("harmless line\n")
    outside = root.parent / "outside" / "secret.txt"
    toolbox = FileToolbox([root])
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(victim), str(outside), "4"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        results = []
        end = time.monotonic() + 3
        while time.monotonic() < end:
            results.append(toolbox.read("sub/victim.txt"))
            results.append(toolbox.grep("TOP|harmless", "sub/victim.txt"))
            results.append(toolbox.grep("TOP|harmless", "sub"))
            results.append(toolbox.grep("TOP|harmless", "sub/*.txt"))
    finally:
        swapper.kill()
        swapper.wait()
        swapper.stdout.close()
    assert not [result for result in results if SECRET in result]
    assert any("harmless line" in result for result in results)  # the race really ran


def test_a_hard_link_to_an_outside_file_is_refused(root: Path) -> None:
    os.link(root.parent / "outside" / "secret.txt", root / "sub" / "hard.txt")
    toolbox = FileToolbox([root])
    read = toolbox.read("sub/hard.txt")
    assert read.startswith("Error: 'sub/hard.txt' has 2 hard links")
    assert SECRET not in read
    assert SECRET not in toolbox.grep("SECRET", "sub/hard.txt")
    walked = toolbox.grep("SECRET", ".")
    assert SECRET not in walked
    assert "hard links" in walked


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


def test_glob_with_an_inverted_range_is_an_error(root: Path) -> None:
    result = FileToolbox([root]).glob("[z-a]*")
    assert result.startswith("Error: invalid glob '[z-a]*'")
    assert FileToolbox([root]).grep("x", "sub/[z-a]*").startswith("Error: invalid glob")


_NO_FDS = """
import os, resource, sys
from ctxoffload.offloader import FileToolbox
from ctxoffload.offloader._regex import compile_pattern
compile_pattern("x")  # load RE2 before the descriptors run out
toolbox = FileToolbox([sys.argv[1]])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
while True:  # take every descriptor that is left
    try:
        held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
for result in (toolbox.grep("x", "."), toolbox.grep("x", "*.txt"), toolbox.glob("**/*.txt"),
               toolbox.grep("x", "notes.txt"), toolbox.read("notes.txt")):
    print(result.splitlines()[0])
"""


def test_with_no_file_descriptors_left_the_tools_say_so(root: Path) -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", _NO_FDS, str(root)], capture_output=True, text=True, check=True
    )
    results = completed.stdout.splitlines()
    assert len(results) == 5, completed.stderr
    for result in results:
        assert result.startswith("Error: "), result
        assert "no file descriptors are left" in result


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads directories whatever their mode")
def test_an_unreadable_directory_is_an_error(root: Path) -> None:
    (root / "sub").chmod(0)
    try:
        assert FileToolbox([root]).grep("x", "sub").startswith("Error: cannot list")
        assert FileToolbox([root]).glob("sub/*").startswith("Error: cannot list")
    finally:
        (root / "sub").chmod(0o755)


async def _with_heartbeat(call: typing.Awaitable[object]) -> tuple[object, float]:
    """Await `call` while a task ticks every 10 ms; return its result and the longest gap."""
    import asyncio
    import time

    gaps: list[float] = []

    async def heartbeat() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    beating = asyncio.create_task(heartbeat())
    try:
        await asyncio.sleep(0.05)
        result = await asyncio.wait_for(call, timeout=60)
        await asyncio.sleep(0.05)
    finally:
        beating.cancel()
    return result, max(gaps)


async def test_pathological_globs_and_regexes_keep_the_event_loop_running(root: Path) -> None:
    (root / ("a" * 60)).write_text("a" * 40 + "b\n")
    _read, grep, glob = workspace_tools(root)
    evil_glob = "*?" * 12 + "#"
    for call in (glob(evil_glob), grep("x", evil_glob), grep("(a+)+$", "a" * 60)):
        result, longest_gap = await _with_heartbeat(call)
        assert isinstance(result, str) and result.startswith("No ")
        assert longest_gap < 1.0
