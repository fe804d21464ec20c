"""A documents folder with one sample file of each format ragloom reads and one broken file, and the checks that an
ingest run indexed it with its structure and file metadata: shared by the tests of `ragloom ingest` and of the
ingest run launched through the webserver's GraphQL API."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ragloom.parsing.sources import FORMATS
from ragloom.settings import SAMPLE_CORPUS

# one file per extension group of ragloom.parsing.sources.FORMATS (the .jsonl lines become markdown or text documents)
FILES = ("company/overview.md", "reports/projects_2024.txt", "news/acquisition_press_release.html",
         "customers/case_studies.jsonl", "reports/annual_report_2024.pdf", "reports/quarterly_review_q3_2024.docx",
         "company/strategy_2025.pptx", "reports/sensor_fleet_2024.xlsx", "customers/customers.csv",
         "news/kelpwatch_shipped.eml")
BROKEN = "reports/broken.docx"
MUSIQUE = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique" / "corpus.jsonl"
WORD = "docs/reports/quarterly_review_q3_2024.docx"
SLIDES = "docs/company/strategy_2025.pptx"


def make_mixed_folder(docs: Path) -> Path:
    """Copies the sample files into ``docs`` and adds a .docx that is no zip package; returns ``docs``."""
    for rel in FILES:
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE_CORPUS / rel, docs / rel)
    (docs / BROKEN).write_bytes(b"PK\x03\x04 not a package")
    assert {FORMATS[Path(rel).suffix] for rel in FILES} == set(FORMATS.values()), "a format has no file here"
    return docs


def check_documents_metadata(meta: dict[str, Any]) -> None:
    """The `documents` asset's materialization metadata: every format read, the broken file the one rejection."""
    by_format = meta["by_format"]
    assert {"docx", "pptx", "xlsx", "csv", "email", "pdf", "html", "markdown", "text"} <= set(by_format), by_format
    assert meta["rejected"] == 1 and BROKEN in meta["rejected_files"], meta["rejected_files"]
    assert meta["documents"] == sum(by_format.values())


def check_retrievable(store: Any, chunking: str = "headered", scope: str = "") -> None:
    """The headered chunks of the Word file and the slides carry their headings and slide titles; a filter on the
    Word file's author, read in ``scope``, finds its chunks and nothing else."""
    from ragloom.filters import bind, build_where
    from ragloom.types import Scope

    (supply,) = store.bm25(chunking, "battery cells single supplier", k=1)
    assert supply.document_id == WORD
    assert supply.heading_path == ["Quarterly Business Review Q3 2024", "Risks", "Supply chain"]
    (targets,) = store.bm25(chunking, "KelpWatch customers target", k=1)
    assert targets.document_id == SLIDES and targets.heading_path == ["Targets for 2025"]
    where = bind(build_where(Scope.from_path(scope), {"author": "Priya Raman"}), store.property_types(chunking))
    by_author = store.bm25(chunking, "HarborSight", k=50, where=where)
    assert by_author and {i.document_id for i in by_author} == {WORD}
    assert len(store.bm25(chunking, "HarborSight", k=50)) > len(by_author)  # the filter did leave others out


def make_musique_folder(docs: Path, documents: int = 300) -> Path:
    """The first ``documents`` MuSiQue paragraphs as .txt files in ``docs`` (created): a folder of several hundred
    chunks, for runs that must split their work (extraction waves, write batches); returns ``docs``."""
    docs.mkdir(parents=True)
    with MUSIQUE.open(encoding="utf-8") as handle:
        for _, line in zip(range(documents), handle, strict=False):
            row = json.loads(line)
            (docs / f"{row['_id']}.txt").write_text(row["text"], encoding="utf-8")
    return docs
