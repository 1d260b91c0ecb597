"""The commands on a database whose data/ payloads are kept in a folder
(`CTXOFFLOAD_PAYLOADS`): cat, verify, export and gc work as on rows; without the variable a
payload outside is named, never read from where the row alone says."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Msg, SqlWorkspace, TextBlock
from ctxoffload.workspace._datastore import data_name
from helpers import image_block

RAW = b"a payload kept in a folder\n" * 100  # text: `cat --raw` prints it


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, str]:
    """A database whose one payload is in `blobs`; (url, blobs, the payload's name)."""
    url, blobs = f"sqlite:///{tmp_path / 'agents.db'}", tmp_path / "blobs"
    ws = SqlWorkspace(url, payloads=blobs)
    msg = Msg(role="user", content=[TextBlock(text="look"), image_block(RAW)])
    asyncio.run(ws.offload_context("run-1", msgs=[msg]))
    ws.close()
    monkeypatch.setenv("CTXOFFLOAD_PAYLOADS", str(blobs))
    return url, blobs, data_name(RAW, "image/png")


def test_cat_verify_and_export_read_payloads_in_the_folder(
    cli: Callable[..., Any], stored: tuple[str, Path, str], tmp_path: Path
) -> None:
    url, _, name = stored
    cat = cli("cat", "--raw", f"{url}/data/{name}")
    assert cat.code == 0, cat.err
    assert cat.out.count("a payload kept in a folder") == 100
    verify = cli("verify", "--workdir", url)
    assert verify.code == 0, verify.out + verify.err
    exported = cli("export", "--all", tmp_path / "copy", "--workdir", url)
    assert exported.code == 0, exported.err
    assert (tmp_path / "copy" / "data" / name).read_bytes() == RAW
    assert cli("verify", "--workdir", tmp_path / "copy").code == 0


def test_without_the_variable_the_payload_is_named_not_read(
    cli: Callable[..., Any],
    stored: tuple[str, Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, blobs, name = stored
    monkeypatch.delenv("CTXOFFLOAD_PAYLOADS")
    result = cli("export", "--all", tmp_path / "copy", "--workdir", url)
    assert f"CTXOFFLOAD_PAYLOADS={blobs}" in result.out + result.err
    assert not (tmp_path / "copy" / "data" / name).exists()


def test_gc_removes_the_payload_from_the_folder(
    cli: Callable[..., Any], stored: tuple[str, Path, str]
) -> None:
    url, blobs, name = stored
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None) as db:
        db.execute("UPDATE data SET stored = stored - 86400")
    db.close()
    done = cli("gc", "--max-bytes", "0", "--workdir", url)
    assert done.code == 0, done.err
    assert not (blobs / "data" / name).exists()
