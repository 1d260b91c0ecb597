"""Sphinx configuration of ctxoffload's documentation site.

Build (warnings are errors, every reference checked):

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

Pages are Markdown (MyST-Parser); the API reference (docs/api/) is generated from the
docstrings by autodoc, which reads them in Google style through napoleon. Nothing is fetched
from the network: references to types outside ctxoffload (the standard library, pydantic,
the frameworks) cannot resolve offline and are ignored by pattern below; a reference to one
of ctxoffload's own names always has to resolve.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import inspect as sphinx_inspect
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

import ctxoffload

project = "ctxoffload"
author = "ctxoffload developers"
project_copyright = "ctxoffload developers (MIT License)"
version = release = ctxoffload.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# -- Markdown ---------------------------------------------------------------------------------

# Headings down to ### get anchors, so `[text](page.md#a-heading)` is a link Sphinx checks.
myst_heading_anchors = 3

# -- Checked references ---------------------------------------------------------------------

nitpicky = True

# Types from outside ctxoffload, which cannot be resolved without intersphinx (no network).
# Each pattern names a library; ctxoffload's own public names are never ignored.
_EXTERNAL = [
    # ctxoffload's private core, named in a few signatures meant for the package's own
    # managers (`Compressor.event(record)`): shown, not linked, as it has no reference page.
    r"ctxoffload\._(disk|search|tokens)\..+",
    # ... and a private module of a package, named by such a signature
    # (`Compressor.whole_output() -> WholeOutput`).
    r"ctxoffload\.compression\._stored_outputs\..+",
    # ... and the report and probes `ctxoffload.eval` returns, read as their fields.
    r"ctxoffload\.eval\._.+",
    # The standard library.
    r"(abc|argparse|asyncio|collections|concurrent|contextlib|dataclasses|datetime|enum|io|json"
    r"|logging|os|pathlib|re|subprocess|threading|types|typing|typing_extensions|weakref)\..+",
    # pydantic, and the annotated types of its fields.
    r"(pydantic|pydantic_core|annotated_types)\..+",
    # ... and as signatures name them unqualified: a field's `Annotated[..., Field(...)]`
    # metadata, and the type of None in an evaluated union.
    r"Field|FieldInfo|NoneType",
    # The frameworks and clients ctxoffload adapts to, imported only when used.
    r"(agentscope|strands|langchain|langchain_core|langgraph|deepagents|pydantic_ai|openai|obstore|re2"
    r"|tiktoken|watchfiles|rich|smolagents|haystack)\..+",
]
nitpick_ignore_regex = [(r"py:.*", pattern) for pattern in _EXTERNAL]

# -- autodoc and napoleon ---------------------------------------------------------------------

autodoc_member_order = "bysource"
autodoc_default_options = {
    "members": True,
    # pydantic's own attributes of every model, documented by pydantic.
    "exclude-members": "model_config, model_fields, model_computed_fields",
}
autodoc_preserve_defaults = True
autodoc_typehints_format = "short"
# The frameworks are optional: their integrations are documented without them installed.
autodoc_mock_imports = [
    "agentscope",
    "strands",
    "langchain",
    "langchain_core",
    "langgraph",
    "deepagents",
    "pydantic_ai",
    "smolagents",
    "haystack",
    "google",
    "llama_index",
    "crewai",
]
python_use_unqualified_type_names = True
# The docstrings write code in single backticks, as in Markdown: show it as code.
default_role = "code"

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# The tables of api/index.md link to the entries; they generate no pages of their own.
autosummary_generate = False

# -- HTML ---------------------------------------------------------------------------------------

html_theme = "furo"
html_title = f"ctxoffload {version}"
html_static_path: list[str] = []


# -- Our own names, by the path users import them from ------------------------------------------
#
# A signature names a type by where it is defined (`ctxoffload.workspace._local.LocalWorkspace`)
# or, where the annotation could not be evaluated, by its bare name (`Offloader`). The reference
# documents each public object once, under the path users import it from. This maps both
# spellings to that entry; what still does not resolve is reported as usual.

_DOCUMENTED_TYPES = {"class", "exception", "function", "data", "method", "property", "attribute"}


def _object_at(path: str) -> Any:
    """The object a dotted path names, importing its module; None when there is none."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                found = getattr(found, part)
        except Exception:
            # AttributeError, or a lazy name whose optional framework is not installed
            # (the integrations' names raise naming the extra to install).
            return None
        return found
    return None


class _Index:
    """The documented Python objects, by identity and by short name (built on first use)."""

    def __init__(self, env: BuildEnvironment) -> None:
        self.by_identity: dict[int, str] = {}
        self.by_short_name: dict[str, set[str]] = {}
        self._keep: list[Any] = []
        for name, entry in env.domains["py"].objects.items():
            if entry.objtype not in _DOCUMENTED_TYPES or entry.aliased:
                continue
            if entry.objtype in {"class", "exception", "function", "data"}:
                self.by_short_name.setdefault(name.rpartition(".")[2], set()).add(name)
            found = _object_at(name)
            if inspect.isclass(found) or inspect.isroutine(found):
                self.by_identity.setdefault(id(found), name)
                self._keep.append(found)

    def documented_name(self, target: str) -> str | None:
        if "." not in target:
            names = self.by_short_name.get(target, set())
            return next(iter(names)) if len(names) == 1 else None
        if not target.startswith("ctxoffload."):
            return None
        # `module.Class.method`: find the documented class, then its member.
        head, tail = target, ""
        while head:
            found = _object_at(head)
            if found is not None and id(found) in self.by_identity:
                return self.by_identity[id(found)] + tail
            head, _, last = head.rpartition(".")
            tail = f".{last}{tail}"
        return None


def _resolve_our_own(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.reference | None:
    if node.get("refdomain") != "py":
        return None
    index: _Index | None = getattr(env, "_ctxoffload_index", None)
    if index is None:
        index = _Index(env)
        env._ctxoffload_index = index  # type: ignore[attr-defined]
    name = index.documented_name(node["reftarget"])
    objects = env.domains["py"].objects
    if name is None or name not in objects:
        return None
    entry = objects[name]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


def _forget_index(app: Sphinx, env: BuildEnvironment) -> None:
    if hasattr(env, "_ctxoffload_index"):
        del env._ctxoffload_index


# -- Signatures of models and dataclasses -----------------------------------------------------
#
# pydantic builds a model's signature from its fields with the annotations evaluated, which
# prints as `list[~types.Annotated[..., FieldInfo(...)]]`; a field with a default factory, in a
# model or a dataclass, prints as `<factory>`, and a default of many lines as all of them.
# Sphinx cannot parse such a signature back. Here a model's or a dataclass's signature shows
# each field's annotation as written in the source (`str | list[Block]`) and a computed or long
# default as `...` (the docstring says what it is).

_LONGEST_DEFAULT = 40


def _source_annotations(cls: type) -> dict[str, str]:
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            written[name] = annotation if isinstance(annotation, str) else _type_name(annotation)
    return written


def _type_name(annotation: Any) -> str:
    if inspect.isclass(annotation):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation).replace("typing.", "")


def _default(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _LONGEST_DEFAULT and "\\n" not in text else "..."


def _field_defaults(cls: type) -> dict[str, str] | None:
    """Each optional field's default as shown; None for a class that is neither kind."""
    if hasattr(cls, "model_fields"):
        return {
            name: "..." if field.default_factory is not None else _default(field.default)
            for name, field in cls.model_fields.items()
            if not field.is_required()
        }
    if dataclasses.is_dataclass(cls):
        shown: dict[str, str] = {}
        for field in dataclasses.fields(cls):
            if field.default_factory is not dataclasses.MISSING:
                shown[field.name] = "..."
            elif field.default is not dataclasses.MISSING:
                shown[field.name] = _default(field.default)
        return shown
    return None


def _class_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str, str | None] | None:
    if what not in {"class", "exception"} or signature is None or not inspect.isclass(obj):
        return None
    if getattr(obj, "_is_protocol", False):
        # A protocol is not instantiated: its inherited `(*args, **kwargs)` says nothing.
        return "", return_annotation
    if any("__sphinx_mock__" in vars(base) for base in obj.__mro__[1:]):
        # A subclass of a mocked framework class (`autodoc_mock_imports`) would show the
        # mock's `(*args, **kwargs)`: show its own `__init__`.
        own = sphinx_inspect.signature(obj.__init__, bound_method=True)
        return sphinx_inspect.stringify_signature(own, show_return_annotation=False), None
    defaults = _field_defaults(obj)
    if defaults is None:
        return None
    written = _source_annotations(obj)
    parts: list[str] = []
    for parameter in inspect.signature(obj).parameters.values():
        kind = parameter.kind
        if kind is inspect.Parameter.KEYWORD_ONLY and not any(p.startswith("*") for p in parts):
            parts.append("*")
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(
            kind, ""
        )
        text = f"{prefix}{parameter.name}: {written.get(parameter.name, 'Any')}"
        if parameter.name in defaults and not prefix:
            text += f" = {defaults[parameter.name]}"
        parts.append(text)
    return f"({', '.join(parts)})", return_annotation


# -- Docstrings of re-exported constants ------------------------------------------------------
#
# A constant's docstring is the string literal after its assignment, which only the source of
# the module that assigns it holds. autodoc looks in the module named by the directive (the
# package that re-exports it) and, finding nothing there, shows the docstring of the value's
# type (`str(object='') -> str`). This takes it from the module that assigns it; a public
# constant without one is a warning, so the build fails until it is written.

logger = logging.getLogger(__name__)


def _constant_docstring(name: str, value: Any) -> list[str] | None:
    short = name.rpartition(".")[2]
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("ctxoffload") or module is None:
            continue
        if short not in vars(module) or vars(module)[short] is not value:
            continue
        try:
            found = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", short))
        except PycodeError:
            continue
        if found:
            return list(found)
    return None


def _constant_doc(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what != "data":
        return
    found = _constant_docstring(name, obj)
    if found is None:
        logger.warning("%s: a public constant without a docstring (write one after it)", name)
        lines[:] = []
    else:
        lines[:] = [*found, ""]


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _constant_doc)
    app.connect("env-updated", _forget_index)
    app.connect("autodoc-process-signature", _class_signature)
    app.connect("missing-reference", _resolve_our_own)
    return {"parallel_read_safe": True}
