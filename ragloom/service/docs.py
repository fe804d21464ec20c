"""The OpenAPI page at ``/docs`` without a CDN: Swagger UI's files come from the npm registry at setup time
(``python -m ragloom.service.docs``, run by ``scripts/web-deps.sh``) into the cache, keyed by version, and the
service serves them itself. Without them ``/docs`` falls back to FastAPI's default page, which loads Swagger UI
from jsDelivr (fine on a machine that reaches it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ragloom.settings import Settings

SWAGGER_UI_VERSION = "5.35.0"  # npm package swagger-ui-dist
FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
ASSETS_ROUTE = "/docs-assets"


def assets_dir(settings: Settings) -> Path:
    return settings.cache_dir / "swagger-ui" / SWAGGER_UI_VERSION


def have_assets(settings: Settings) -> bool:
    folder = assets_dir(settings)
    return all((folder / name).is_file() for name in FILES)


def fetch_assets(settings: Settings) -> Path:
    """Swagger UI's files into the cache with ``npm pack`` (once per version); the folder."""
    target = assets_dir(settings)
    if have_assets(settings):
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH: /docs will load Swagger UI from its CDN")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([npm, "pack", "--silent", f"swagger-ui-dist@{SWAGGER_UI_VERSION}"], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, timeout=300)
        (tarball,) = Path(tmp).glob("swagger-ui-dist-*.tgz")
        staging = Path(tmp) / "files"
        staging.mkdir()
        with tarfile.open(tarball) as tar:
            for name in FILES:
                member = tar.extractfile(f"package/{name}")
                if member is None:
                    raise RuntimeError(f"swagger-ui-dist@{SWAGGER_UI_VERSION} has no {name}")
                (staging / name).write_bytes(member.read())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(staging, target)  # whole or not at all: have_assets never sees half a copy
    return target


if __name__ == "__main__":
    try:
        print(f"[ragloom] Swagger UI {SWAGGER_UI_VERSION} for /docs in {fetch_assets(Settings.from_env())}")
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"[ragloom] Swagger UI not fetched ({e}); /docs will load it from its CDN", file=sys.stderr)
