"""docs/reference/ is generated from the code: a committed page that differs from a fresh render fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragloom import docs_reference
from ragloom.settings import Settings, env_name

REPO = Path(__file__).resolve().parents[2]


def test_committed_reference_pages_are_fresh() -> None:
    # A fresh process: tests register extra strategies and chunkers, which must not reach the pages.
    run = subprocess.run([sys.executable, "-m", "ragloom.docs_reference", "--check"], capture_output=True, text=True,
                         cwd=REPO)
    assert run.returncode == 0, run.stderr + "\n(run `python -m ragloom.docs_reference` and commit the pages)"


def test_stale_page_is_named(tmp_path: Path) -> None:
    for name, text in docs_reference.render().items():
        (tmp_path / name).write_text(text)
    assert docs_reference.stale_pages(tmp_path) == []
    (tmp_path / "settings.md").write_text("# Settings\n\nhand-edited\n")
    (tmp_path / "cli.md").unlink()
    assert docs_reference.stale_pages(tmp_path) == ["settings.md", "cli.md"]


def test_every_setting_has_help_and_a_row() -> None:
    from dataclasses import fields

    page = docs_reference.settings_page()
    for f in fields(Settings):
        assert f.metadata.get("help"), f"Settings.{f.name} has no help metadata"
        assert f"`{env_name(f.name)}`" in page


def test_cli_page_names_every_subcommand_and_flag() -> None:
    page = docs_reference.cli_page()
    for text in ("## `ragloom query`", "## `ragloom keys create`", "## `ragloom eval`", "`--strategy`", "`--option`"):
        assert text in page


def test_http_page_lists_every_endpoint() -> None:
    from ragloom.service.app import create_app

    page = docs_reference.http_api_page()
    for path, methods in create_app(Settings()).openapi()["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in page
