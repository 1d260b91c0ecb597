"""A signature a page writes out for a public class (`SqlWorkspace(url, *, timeout=30.0, ...)`,
in a text block or a line of code of its own) is the class's signature: the same parameters,
in the same order, keyword-only where the class has them so, with the same defaults. A
parameter added to the class and not to its page fails here."""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from blocks import ROOT, blocks, pages

import ctxoffload

# `Name(...)` alone on a line of code, or a text block holding nothing else.
_INLINE = re.compile(r"^`(?P<sig>[A-Z]\w*\(.*\))`$", re.M)


def written_signatures() -> list[tuple[str, str, str]]:
    """(where, class name, the signature as written) for every public class a page spells."""
    found: list[tuple[str, str, str]] = []
    for page in pages():
        where = page.relative_to(ROOT).as_posix()
        texts = [b.code for b in blocks(page) if b.language == "text"]
        texts += [m.group("sig") for m in _INLINE.finditer(page.read_text(encoding="utf-8"))]
        for text in texts:
            flat = " ".join(text.split())
            match = re.fullmatch(r"([A-Z]\w*)\((.*)\)", flat)
            if match and match.group(1) in ctxoffload.__all__ and "=" in match.group(2):
                found.append((where, match.group(1), flat))
    return found


CASES = written_signatures()


def parameters(written: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter of a signature as written."""
    tree = ast.parse(f"def f({written.split('(', 1)[1].rsplit(')', 1)[0]}): pass")
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    args = function.args
    positional = args.posonlyargs + args.args
    defaults: list[object] = [inspect.Parameter.empty] * (len(positional) - len(args.defaults)) + [
        ast.literal_eval(d) for d in args.defaults
    ]
    out = [(a.arg, "positional", d) for a, d in zip(positional, defaults, strict=True)]
    out += [
        (a.arg, "keyword", inspect.Parameter.empty if d is None else ast.literal_eval(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return out


def actual(name: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter of the class's constructor."""
    return [
        (
            p.name,
            "keyword" if p.kind is inspect.Parameter.KEYWORD_ONLY else "positional",
            p.default,
        )
        for p in inspect.signature(getattr(ctxoffload, name)).parameters.values()
    ]


def test_the_pages_spell_signatures() -> None:
    assert {name for _, name, _ in CASES} >= {"SqlWorkspace", "ObjectStoreWorkspace"}


@pytest.mark.parametrize(("where", "name", "written"), CASES, ids=[f"{w}:{n}" for w, n, _ in CASES])
def test_a_written_signature_is_the_class_signature(where: str, name: str, written: str) -> None:
    assert parameters(written) == actual(name), f"{where}: {written}"


def test_the_check_reads_keyword_only_defaults() -> None:
    assert parameters("C(url, *, timeout=30.0, payloads=None)") == [
        ("url", "positional", inspect.Parameter.empty),
        ("timeout", "keyword", 30.0),
        ("payloads", "keyword", None),
    ]
