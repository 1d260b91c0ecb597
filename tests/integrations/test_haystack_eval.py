"""`ctxoffload eval` asks a Haystack chat generator through the Haystack door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
Haystack's own `OpenAIChatGenerator` (its messages, its `Tool`s, its tool calls), answers and
reads alike, probe by probe."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
from frameworks import require_framework

require_framework("haystack", "haystack")

from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from host_eval import asked_alike  # noqa: E402


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# `asked_alike` collects it inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_haystack_generator_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    asked_alike(
        tmp_path,
        lambda url: nullcontext(
            OpenAIChatGenerator(api_key=Secret.from_token("test"), model="reader", api_base_url=url)
        ),
    )
