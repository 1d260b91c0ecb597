"""The landing page routes each kind of user to their page from its first screen, and the
sidebar is grouped: start, hosts, stores, concepts, reference. Every page of the site is in
exactly one group, every host's guide in Hosts, and getting-started's "Next" names them."""

from __future__ import annotations

import re

from blocks import ROOT

DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"
GROUPS = ["Start", "Hosts", "Stores", "Concepts", "Reference"]


def toctrees() -> dict[str, list[str]]:
    """The sidebar's groups: caption -> the pages it lists, in order."""
    text = INDEX.read_text(encoding="utf-8")
    found: dict[str, list[str]] = {}
    for body in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
        caption = re.search(r"^:caption: (.+)$", body, re.M)
        assert caption, f"a toctree of index.md has no caption: {body!r}"
        found[caption.group(1)] = [
            line.strip() for line in body.splitlines() if line.strip() and line[0] != ":"
        ]
    return found


def links(text: str) -> set[str]:
    """The pages a Markdown text links to, without their `.md` and `#fragment`."""
    return {
        target.split("#", 1)[0].removesuffix(".md")
        for target in re.findall(r"\]\(([^)\s]+)\)", text)
        if not re.match(r"[a-z]+:", target)
    }


def first_screen() -> str:
    """What the landing page shows before its first section heading."""
    return INDEX.read_text(encoding="utf-8").split("\n## ", 1)[0]


def test_the_sidebar_has_the_five_groups_in_order() -> None:
    assert list(toctrees()) == GROUPS


def test_every_page_is_in_exactly_one_group() -> None:
    listed = [page for pages in toctrees().values() for page in pages]
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(listed)}"
    pages = {
        p.relative_to(DOCS).with_suffix("").as_posix()
        for p in DOCS.rglob("*.md")
        if "_build" not in p.parts and p.parent.name != "api"
    }
    pages = {p for p in pages if p != "index"} | {"api/index"}
    assert set(listed) == pages, set(listed) ^ pages


def test_every_host_guide_is_in_hosts_with_the_contract() -> None:
    hosts = toctrees()["Hosts"]
    assert hosts[0] == "guides/hosts", "the door contract opens the hosts"
    for guide in ("langchain", "deepagents", "pydantic-ai", "openai-agents", "strands"):
        assert f"guides/{guide}" in hosts
    assert {"guides/agentscope", "guides/coding-agents"} <= set(hosts)


def test_the_first_screen_routes_every_kind_of_user() -> None:
    shown = links(first_screen())
    hosts = {page for page in toctrees()["Hosts"]}
    own = {"guides/agent", "guides/compression", "getting-started"}
    stores = {"guides/workspace", "guides/object-storage", "guides/database", "guides/memory"}
    missing = (hosts | own | stores | {"cli"}) - shown
    assert not missing, f"the landing page's first screen does not link to {sorted(missing)}"


def test_getting_started_ends_naming_the_host_guides() -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    following = links(text.split("\n## Next", 1)[1])
    hosts = {page.removeprefix("guides/") for page in toctrees()["Hosts"]}
    missing = {f"guides/{h}" for h in hosts} - following
    assert not missing, f"getting-started's Next does not name {sorted(missing)}"
