"""The documentation's own rules: experiment records, links to them, figures only with a current record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
RECORDS = DOCS / "experiments"
RECORD_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")
HEADER = re.compile(
    r"\A# .+\n\n"
    r"- \*\*date:\*\* (?P<date>\d{4}-\d{2}-\d{2})\n"
    r"- \*\*commit:\*\* `(?P<commit>[0-9a-f]{7,40})`\n"
    r"- \*\*reproduce:\*\* `(?P<reproduce>[^`\n]+)`\n"
    r"- \*\*status:\*\* (?P<status>current|superseded-by: \[(?P<label>[^\]]+)\]\((?P<target>[^)]+)\))\n"
    r"\n## (?P<first>.+)\n"
)
# A link to a record, from anywhere (README: docs/experiments/x.md; a guide: ../experiments/x.md).
RECORD_LINK = re.compile(r"\]\((?:[^)\s]*/)?(\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md)(?:#[^)]*)?\)")
# What counts as a measured figure: a three-decimal metric, a confidence interval, a latency, a rate, a ratio.
FIGURE = re.compile(
    r"(?<![\w.])\d\.\d{3}(?![\w])"
    r"|\[[+−-]\d+\.\d+, [+−-]\d+\.\d+\]"
    r"|(?<![\w.])\d[\d,]*(?:\.\d+)? ?(?:ms|chunks/s|MB)\b"
    r"|(?<![\w.])\d+(?:\.\d+)?×"
)


def parse_record(path: Path) -> re.Match[str]:
    match = HEADER.match(path.read_text())
    assert match, (f"{path.name}: the header block must follow the title, in this order: date, commit, reproduce "
                   "(one `command`), status (current | superseded-by: [file](file)); see docs/experiments/index.md")
    return match


def record_files() -> list[Path]:
    return sorted(RECORDS.glob("20*.md"))


def record_status() -> dict[str, str]:
    return {p.name: parse_record(p)["status"] for p in record_files()}


def guide_files() -> list[Path]:
    """The README and every docs page a user reads for guidance: not the records, not the generated reference."""
    pages = [p for p in DOCS.rglob("*.md") if RECORDS not in p.parents and (DOCS / "reference") not in p.parents]
    return [REPO / "README.md", *sorted(pages)]


def blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph, list item and table row; fenced code is skipped."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    fenced = False

    def flush() -> None:
        if current:
            out.append((start, " ".join(current)))
            current.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        new_block = not stripped or stripped.startswith(("|", "#")) or re.match(r"^(?:[-*]|\d+\.) ", line)
        if new_block:
            flush()
        if stripped:
            if not current:
                start = number
            current.append(stripped)
            if stripped.startswith(("|", "#")):
                flush()
    flush()
    return out


def test_records_exist_and_are_named_by_date() -> None:
    assert len(record_files()) >= 10
    for path in record_files():
        assert RECORD_NAME.match(path.name), f"{path.name}: name it <yyyy-mm-dd>-<slug>.md"


@pytest.mark.parametrize("path", record_files(), ids=lambda p: p.name)
def test_record_header_and_conclusion_first(path: Path) -> None:
    match = parse_record(path)
    assert path.name.startswith(match["date"]), f"{path.name}: the date in the header is {match['date']}"
    assert match["first"] == "Conclusion", f"{path.name}: the first section must be ## Conclusion"
    conclusion = path.read_text().split("## Conclusion", 1)[1].split("\n## ", 1)[0]
    assert len(conclusion.split()) >= 10, f"{path.name}: the conclusion says nothing"
    if match["target"]:
        assert match["label"] == match["target"], f"{path.name}: superseded-by [x](x): label and link differ"
        assert (RECORDS / match["target"]).is_file(), f"{path.name}: superseded-by {match['target']}, no such record"
        assert match["target"] != path.name


def test_supersession_ends_in_a_current_record() -> None:
    status = record_status()
    for name in status:
        seen = {name}
        while status[name] != "current":
            name = status[name].split("](", 1)[1].rstrip(")")
            assert name not in seen, f"superseded-by cycle through {name}"
            seen.add(name)


def test_index_lists_every_record() -> None:
    index = (RECORDS / "index.md").read_text()
    listed = {m for m in RECORD_LINK.findall(index)}
    missing = sorted(p.name for p in record_files() if p.name not in listed)
    assert not missing, f"docs/experiments/index.md does not list {missing}"


def test_guides_link_only_current_records() -> None:
    status = record_status()
    bad = []
    for path in guide_files():
        for name in RECORD_LINK.findall(path.read_text()):
            if name not in status:
                bad.append(f"{path.relative_to(REPO)}: {name} is no record")
            elif status[name] != "current":
                bad.append(f"{path.relative_to(REPO)}: {name} is {status[name]}")
    assert not bad, "links to missing or superseded records:\n" + "\n".join(bad)


def test_every_figure_in_readme_and_guides_links_a_current_record() -> None:
    status = record_status()
    bare = []
    for path in guide_files():
        for line, block in blocks(path.read_text()):
            if FIGURE.search(block) and not any(status.get(n) == "current" for n in RECORD_LINK.findall(block)):
                bare.append(f"{path.relative_to(REPO)}:{line}: {FIGURE.search(block)[0]!r} in {block[:90]!r}")
    assert not bare, "figures without a link to a current record in the same paragraph or row:\n" + "\n".join(bare)


def test_figure_check_catches_a_bare_figure() -> None:
    """The check above would catch a figure with no record, and accepts one with a link to a current record."""
    current = next(n for n, s in record_status().items() if s == "current")
    text = (f"graph_rag reaches R@10 0.782.\n\nhybrid p95 59.9 ms ([record](experiments/{current})).\n\n"
            "```\n0.123 in code\n```\n| a | 1.35× |\n")
    flagged = [b for _, b in blocks(text) if FIGURE.search(b) and not RECORD_LINK.findall(b)]
    assert flagged == ["graph_rag reaches R@10 0.782.", "| a | 1.35× |"]


def test_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= 400, f"README.md has {lines} lines; move material into docs/"


def test_every_page_is_in_the_nav_or_a_record() -> None:
    """mkdocs --strict also warns about pages left out of the nav; this names them without a build."""
    config = (REPO / "mkdocs.yml").read_text()
    in_nav = set(re.findall(r"^\s*-\s+(?:[^:\n]+:\s+)?([\w./-]+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if RECORDS not in p.parents or p.name == "index.md"}
    assert pages - in_nav == set(), f"pages not in mkdocs.yml's nav: {sorted(pages - in_nav)}"
    assert in_nav - pages == set(), f"nav entries with no page: {sorted(in_nav - pages)}"


def test_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict` (as scripts/test runs it): a broken link, a missing anchor or page fails."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, env=env)
    warnings = [line for line in run.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert run.returncode == 0, "\n".join(warnings) or run.stderr[-2000:]
