"""BEIR-style evaluation folders (corpus.jsonl, queries.jsonl, qrels.tsv; ObliQA's passages) as typed records."""

from __future__ import annotations

import csv
import dataclasses
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragloom.errors import ConfigError, ParseError
from ragloom.parsing import jsonl_documents
from ragloom.types import Document

Qrels = dict[str, dict[str, int]]  # query id -> {document or passage id: relevance}


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str


@dataclass(frozen=True)
class Passage:
    """A gold passage: ``text[start:end]`` of document ``document_id``."""

    passage_id: str
    document_id: str
    start: int
    end: int


@dataclass
class EvalDataset:
    name: str
    path: Path
    documents: list[Document]
    queries: list[Query]
    qrels: Qrels  # document level
    passages: dict[str, Passage] = field(default_factory=dict)  # passage id -> span (ObliQA)
    passage_qrels: Qrels = field(default_factory=dict)

    @property
    def has_passages(self) -> bool:
        return bool(self.passage_qrels)

    def restricted_to(self, document_ids: Iterable[str]) -> EvalDataset:
        """The dataset on these documents only, with the queries whose relevant documents are all among them."""
        keep = set(document_ids)
        return dataclasses.replace(self, documents=[d for d in self.documents if d.document_id in keep],
                                   queries=[q for q in self.queries if set(self.qrels[q.query_id]) <= keep])



def _require(path: Path) -> Path:
    if not path.is_file():
        raise ConfigError(f"evaluation dataset file missing: {path}")
    return path


def _read_jsonl_objects(path: Path) -> list[dict]:
    rows = []
    with _require(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ParseError("malformed", f"{path}:{number}: {e.msg}") from e
    return rows


def read_qrels(path: Path) -> Qrels:
    """A BEIR qrels TSV with a header line: ``query-id  corpus-id  score``; score 0 rows are dropped."""
    qrels: Qrels = {}
    with _require(path).open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader, None)  # header
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise ParseError("malformed", f"{path}:{number}: expected 3 tab-separated columns, got {row!r}")
            try:
                score = int(float(row[2]))
            except ValueError as e:
                raise ParseError("malformed", f"{path}:{number}: score {row[2]!r} is not a number") from e
            if score > 0:
                qrels.setdefault(row[0], {})[row[1]] = score
    return qrels


def read_corpus(path: Path, name: str) -> list[Document]:
    """Corpus records as Documents with ``document_id`` = the record's ``_id`` and the text kept byte for byte
    (gold passages are character offsets into it); Markdown headings are parsed so headered and hierarchical
    chunking see the structure."""
    text = _require(path).read_text(encoding="utf-8")
    try:
        # corpus metadata is not carried: its keys (e.g. "source") could shadow the chunk fields retrievers read
        return jsonl_documents(text, f"{name}/corpus.jsonl", metadata={"dataset": name}, record_metadata=False,
                               bare_ids=True, fmt=None)
    except ParseError as e:
        raise ParseError(e.reason, f"{path}: {e.detail}") from e


def load_dataset(path: str | Path, max_queries: int | None = None, corpus_limit: int | None = None,
                 seed: int = 13) -> EvalDataset:
    """Load a dataset folder; optionally a seeded sample of queries and a corpus cut to ``corpus_limit`` documents.

    Only queries with at least one relevant document are kept. The cut corpus always holds every gold
    document of the sampled queries, then a seeded random sample of the others.
    """
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"evaluation dataset folder not found: {root}")
    name = root.name
    documents = read_corpus(root / "corpus.jsonl", name)
    by_id = {d.document_id: d for d in documents}
    qrels = read_qrels(root / "qrels.tsv")
    queries = [Query(str(r["_id"]), r["text"]) for r in _read_jsonl_objects(root / "queries.jsonl")
               if str(r.get("_id", "")) in qrels and isinstance(r.get("text"), str) and r["text"].strip()]
    unknown = sorted({d for q in queries for d in qrels[q.query_id] if d not in by_id})
    if unknown:
        raise ConfigError(f"{root}/qrels.tsv names documents missing from the corpus: {unknown[:5]}")

    passages: dict[str, Passage] = {}
    passage_qrels: Qrels = {}
    if (root / "qrels_passages.tsv").exists():
        for r in _read_jsonl_objects(root / "passages.jsonl"):
            p = Passage(str(r["_id"]), str(r["doc_id"]), int(r["start"]), int(r["end"]))
            doc = by_id.get(p.document_id)
            if doc is None or not 0 <= p.start < p.end <= len(doc.text):
                raise ConfigError(f"{root}/passages.jsonl: passage {p.passage_id} does not fit document "
                                  f"{p.document_id!r}")
            passages[p.passage_id] = p
        passage_qrels = read_qrels(root / "qrels_passages.tsv")
        missing = sorted({p for rel in passage_qrels.values() for p in rel if p not in passages})
        if missing:
            raise ConfigError(f"{root}/qrels_passages.tsv names unknown passages: {missing[:5]}")

    rng = random.Random(seed)
    if max_queries is not None and max_queries < len(queries):
        queries = sorted(rng.sample(queries, max_queries), key=lambda q: q.query_id)
    query_ids = {q.query_id for q in queries}
    qrels = {q: rel for q, rel in qrels.items() if q in query_ids}
    passage_qrels = {q: rel for q, rel in passage_qrels.items() if q in query_ids}

    if corpus_limit is not None and corpus_limit < len(documents):
        gold = {d for rel in qrels.values() for d in rel}
        others = [d.document_id for d in documents if d.document_id not in gold]
        keep = gold | set(rng.sample(others, max(0, min(len(others), corpus_limit - len(gold)))))
        documents = [d for d in documents if d.document_id in keep]  # corpus order kept
        passages = {pid: p for pid, p in passages.items() if p.document_id in keep}

    return EvalDataset(name=name, path=root, documents=documents, queries=queries, qrels=qrels,
                       passages=passages, passage_qrels=passage_qrels)
