"""`import ctxoffload` loads nothing heavy; every public name still resolves on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = [
    "ctxoffload",
    "ctxoffload.workspace",
    "ctxoffload.agent",
    "ctxoffload.compression",
    "ctxoffload.readback",
]
HEAVY = ["pydantic", "tiktoken", "openai", "rich", "obstore", "re2", "asyncio", "typing"]


def test_import_ctxoffload_loads_no_heavy_module() -> None:
    code = f"import sys, ctxoffload; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_first_use_of_a_name_loads_what_it_needs() -> None:
    code = (
        "import sys; from ctxoffload import Msg; "
        "print('pydantic' in sys.modules, 'ctxoffload.agent._agent' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]


@pytest.mark.parametrize("exact", [False, True])
def test_counting_a_text_loads_no_pydantic_model(exact: bool) -> None:
    # A count needs the counter, not the message model: a hook or a script that sizes a
    # string starts without pydantic's model machinery (issue 28: the first exact count in
    # a fresh process within 150 ms).
    code = (
        "import sys; from ctxoffload import get_token_counter; "
        f"n = get_token_counter(exact={exact}).count_text('hello world'); "
        "print(n > 0, 'pydantic.main' in sys.modules, 'ctxoffload.messages' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False", "False"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", PACKAGES)
def test_an_unknown_name_is_an_attribute_error_naming_it(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_a_resolved_name_is_the_defining_modules_object() -> None:
    import ctxoffload
    from ctxoffload.workspace._local import LocalWorkspace

    assert ctxoffload.LocalWorkspace is LocalWorkspace
    assert ctxoffload.workspace.LocalWorkspace is LocalWorkspace
