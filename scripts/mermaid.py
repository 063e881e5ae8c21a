"""Mermaid's JavaScript, served by the docs site itself: the diagrams render with no CDN in reach.

mkdocs-material 9.8.1 draws a ```mermaid block with the global `mermaid`, and loads
https://unpkg.com/mermaid@11/dist/mermaid.min.js only while `typeof mermaid == "undefined"`
(material/templates/assets/javascripts/bundle.a5f9d56c.min.js). overrides/main.html loads the site's
own copy in the page's head, before that bundle, so the CDN is never asked.

The copy is mermaid's own build, `dist/mermaid.min.js` of the npm package mermaid@MERMAID_VERSION (it
ends by setting globalThis.mermaid), taken from the npm registry's tarball and checked against the
registry's sha512 integrity (`npm view mermaid@11.17.2 dist.integrity`); nothing of it is committed.
It is kept in .cache/mermaid/ and copied into the built site by this file as an mkdocs hook
(mkdocs.yml `hooks:`), with mermaid's MIT license beside it.

    python scripts/mermaid.py     fetch it into .cache/mermaid/ (scripts/setup.sh does; npm if present)
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MERMAID_VERSION = "11.17.2"  # the newest 11.x, the major version mkdocs-material 9.8.1 loads
INTEGRITY = "sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg=="
TARBALL = f"https://registry.npmjs.org/mermaid/-/mermaid-{MERMAID_VERSION}.tgz"
CACHE = ROOT / ".cache" / "mermaid" / MERMAID_VERSION
SITE_PATH = "javascripts/mermaid.min.js"  # where the site serves it (overrides/main.html)
FILES = {"package/dist/mermaid.min.js": "mermaid.min.js", "package/LICENSE": "mermaid.LICENSE.txt"}


class VendorError(Exception):
    """Why mermaid could not be vendored, in one line."""


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def download() -> bytes:
    """The tarball: by npm where it is installed (the registry's own client), else over HTTPS."""
    if shutil.which("npm"):
        with tempfile.TemporaryDirectory() as folder:
            packed = subprocess.run(
                ["npm", "pack", f"mermaid@{MERMAID_VERSION}", "--pack-destination", folder, "--silent"],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if packed.returncode == 0:
                return (Path(folder) / f"mermaid-{MERMAID_VERSION}.tgz").read_bytes()
    try:
        with urllib.request.urlopen(TARBALL, timeout=120) as answer:
            return answer.read()
    except OSError as error:
        raise VendorError(f"cannot download {TARBALL}: {error}") from None


def vendor() -> Path:
    """The folder holding mermaid.min.js and its license, fetched and checked once."""
    if all((CACHE / name).is_file() for name in FILES.values()):
        return CACHE
    data = download()
    if integrity_of(data) != INTEGRITY:
        raise VendorError(f"mermaid-{MERMAID_VERSION}.tgz does not match its pinned integrity {INTEGRITY}")
    staging = CACHE.with_name(CACHE.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member, name in FILES.items():
            (staging / name).write_bytes(archive.extractfile(member).read())
    shutil.rmtree(CACHE, ignore_errors=True)
    staging.rename(CACHE)  # all of it or nothing: a later build never finds half a copy
    return CACHE


def on_post_build(config, **_) -> None:
    """mkdocs hook: the site gets its own copy (mkdocs build and mkdocs serve alike)."""
    from mkdocs.exceptions import PluginError

    try:
        folder = vendor()
    except VendorError as error:
        raise PluginError(
            f"mermaid: {error} (run `python scripts/mermaid.py` where the npm registry is reachable)"
        ) from None
    target = Path(config["site_dir"]) / SITE_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    for name in FILES.values():
        shutil.copyfile(folder / name, target.parent / name)


def main() -> int:
    try:
        folder = vendor()
    except VendorError as error:
        print(f"mermaid: {error}", file=sys.stderr)
        return 1
    print(f"mermaid: {MERMAID_VERSION} in {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
