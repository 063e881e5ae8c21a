"""The docs site builds with `mkdocs build --strict`, and a broken link, a broken anchor, a page left
out of the nav or a nav entry without its page fails that build; the README's links land on files
and headings that exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs_support import DOCS, ROOT, docs_script


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # NO_MKDOCS_2_WARNING: mkdocs-material 9.8 prints a banner about its end of life on every build.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_the_site_builds_in_strict_mode_with_every_page(tmp_path):
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    for source in DOCS.rglob("*.md"):
        relative = source.relative_to(DOCS).with_suffix("")
        built = tmp_path / "site" / (relative.parent if relative.name == "index" else relative) / "index.html"
        assert built.is_file(), f"{source.relative_to(ROOT)} was not built"


def copy_of_the_site(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    # the theme override and the mermaid hook, with the mermaid already fetched (scripts/mermaid.py)
    shutil.copytree(ROOT / "overrides", tmp_path / "overrides")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mermaid.py", tmp_path / "scripts" / "mermaid.py")
    (tmp_path / ".cache").symlink_to(ROOT / ".cache")
    return tmp_path


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


BREAKAGES = {
    "a link to a page that does not exist": (
        lambda site: append(site / "docs" / "index.md", "\n[gone](no-such-page.md)\n"),
        "no-such-page.md",
    ),
    "a link to a heading that does not exist": (
        lambda site: append(site / "docs" / "index.md", "\n[gone](costs.md#no-such-heading)\n"),
        "no-such-heading",
    ),
    "a page left out of the nav": (lambda site: (site / "docs" / "orphan.md").write_text("# Orphan\n"), "orphan.md"),
    "a nav entry without its page": (lambda site: (site / "docs" / "gpu.md").unlink(), "gpu.md"),
}


def test_an_unbroken_copy_of_the_site_builds(tmp_path):
    """So that each breakage below is what fails its build."""
    result = build(copy_of_the_site(tmp_path) / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_the_strict_build_fails_on(breakage, tmp_path):
    """The check itself: what `--strict` and mkdocs.yml's `validation` settings must refuse."""
    site = copy_of_the_site(tmp_path)
    change, named = BREAKAGES[breakage]
    change(site)
    result = build(site / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and named in result.stderr, result.stderr[-2000:]


def headings(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {docs_script().anchor(h) for h in re.findall(r"^#{1,6} (.+?)\s*$", text, re.MULTILINE)}


def test_every_link_of_the_readme_lands_on_a_file_and_heading_that_exist():
    """The README is not part of the site (GitHub renders it), so mkdocs does not check its links."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local), "the README links into no docs page"
    for link in local:
        target, _, fragment = link.partition("#")
        path = ROOT / target if target else ROOT / "README.md"
        assert path.exists(), f"README links to {link}: no such file"
        if fragment:
            assert fragment in headings(path), f"README links to {link}: no such heading in {target or 'README.md'}"


def test_the_readme_stays_a_front_page():
    """Issue 25: read in five minutes; the reference lives in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_the_diagram_loads_mermaid_from_the_site_itself(tmp_path):
    """mkdocs-material fetches mermaid from unpkg.com unless `mermaid` is already defined (its bundle:
    `typeof mermaid=="undefined"` before loading https://unpkg.com/mermaid@11/dist/mermaid.min.js), so
    without a CDN the architecture diagram stayed raw Mermaid text (issue 30, item 7). The built page
    loads the site's own copy in its head, ahead of that bundle, and the copy is mermaid's build."""
    import html.parser

    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    page = (tmp_path / "site" / "index.html").read_text()
    assert '<pre class="mermaid">' in page, "the home page has no diagram to draw"

    class Scripts(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.sources: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag == "script" and dict(attrs).get("src"):
                self.sources.append(dict(attrs)["src"])

    scripts = Scripts()
    scripts.feed(page)
    own = [src for src in scripts.sources if src.endswith("mermaid.min.js")]
    assert own == ["javascripts/mermaid.min.js"], scripts.sources  # relative: served by the site, no host
    bundle = next(i for i, src in enumerate(scripts.sources) if "assets/javascripts/bundle." in src)
    assert scripts.sources.index(own[0]) < bundle, "mermaid must be defined before the theme's bundle looks for it"
    served = tmp_path / "site" / "javascripts" / "mermaid.min.js"
    text = served.read_text()
    assert text.rstrip().endswith('globalThis["mermaid"] = globalThis.__esbuild_esm_mermaid_nm["mermaid"].default;')
    assert (tmp_path / "site" / "javascripts" / "mermaid.LICENSE.txt").read_text().startswith("The MIT License")
    # and the theme still only falls back to the CDN when mermaid is undefined (a newer bundle might not)
    bundle_js = next((tmp_path / "site" / "assets" / "javascripts").glob("bundle.*.min.js")).read_text()
    assert 'typeof mermaid=="undefined"' in bundle_js
