"""The checks before grep's lines are made inert (`cli/_output.py`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxoffload.cli._output import inert_bytes, printable_ascii, printable_ascii_by_libc

# Mostly printable ASCII, with every byte that is not now and then.
_LINES = st.binary(max_size=300) | st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\t\n")
).map(str.encode)


@given(st.lists(_LINES, max_size=5).map(b"".join))
def test_the_c_librarys_check_agrees_with_translate(data: bytes) -> None:
    by_libc = printable_ascii_by_libc()
    assert by_libc(data) == printable_ascii(data)
    if printable_ascii(data):
        assert inert_bytes(data) == data


@pytest.mark.parametrize(
    "data",
    [b"", b"ok\tline\n", b"nul \x00 inside", b"ends in nul\x00", b"\x00", b"cr\r\n", b"del\x7f"],
)
def test_a_nul_or_a_control_byte_is_not_printable_to_the_c_librarys_check(data: bytes) -> None:
    expected = all(0x20 <= byte < 0x7F or byte in b"\t\n" for byte in data)
    assert printable_ascii_by_libc()(data) is expected
    assert printable_ascii(data) is expected
