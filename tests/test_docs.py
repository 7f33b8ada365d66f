"""The documents a user reads: a short README, a page per command naming every flag, links that lead somewhere,
and no mention of the work periods that made the project (its documents speak of it by date or version)."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from trainspeed.cli import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 200


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES


@pytest.mark.parametrize("command", [m.__name__.rsplit(".", 1)[-1] for m in SUBCOMMANDS])
def test_every_flag_of_a_command_is_on_its_page(command: str) -> None:
    page = (DOCS / f"{command}.md").read_text()
    flags = {s for a in _subparsers()[command]._actions for s in a.option_strings if s not in ("-h", "--help")}
    assert flags, command
    missing = sorted(f for f in flags if not re.search(rf"`{re.escape(f)}[ `=\]|]", page))
    assert not missing, f"docs/{command}.md does not name {missing}"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)}


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # links in code blocks are not links
    return [m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", text) if "://" not in m.group(1)]


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_lead_to_a_file_and_a_heading(page: Path) -> None:
    broken = []
    for link in _links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(link)
    assert not broken, f"{page.name}: {broken}"


def test_the_slug_is_githubs() -> None:
    assert _slug("`trainspeed sweep world-size`") == "trainspeed-sweep-world-size"
    assert _slug("Training-memory estimate") == "training-memory-estimate"


def test_no_document_or_source_names_a_work_period() -> None:
    pattern = "session" + " [0-9]"  # written in two parts, so that this file does not match itself
    try:
        found = subprocess.run(["git", "grep", "-inE", pattern], cwd=ROOT, capture_output=True, text=True,
                               check=False)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if found.returncode not in (0, 1) or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert found.stdout == "", found.stdout
