"""Helpers for the reliability suite and its subprocess worker: figures, SciFact chunks, a fast embedder and NER.

The fault tests measure what the stores keep when a server or the process dies, not the models, so
they embed with a deterministic hash (exact expected vectors, no model load) and find entities with a
rule-based spaCy pipeline (the real EntityExtractor and resolution, ~100x faster than en_core_web_sm).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.embedding.base import Embedder
from ragloom.types import Chunk, Scope, make_chunk_id

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "test-artifacts" / "reliability.jsonl"
SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
STRATEGY = "recursive"


def record(test: str, **figures: Any) -> dict[str, Any]:
    """Print a test's figures and append them as one JSON line to test-artifacts/reliability.jsonl."""
    line = {"test": test, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **figures}
    text = json.dumps(line, default=str, sort_keys=False)
    print(f"[reliability] {text}", flush=True)
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with open(FIGURES, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return line


class HashEmbedder(Embedder):
    """Unit vectors seeded by sha256 of the text: the same text always gets the same vector."""

    model_id = "reliability-hash-384"
    dimension = 384
    max_tokens = 512

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            out[i] = vector / np.linalg.norm(vector)
        return out


def abstracts(n: int) -> list[tuple[str, str]]:
    """(document id, text) of the first ``n`` SciFact abstracts; seeded synthetic text where the data is absent."""
    out: list[tuple[str, str]] = []
    if SCIFACT.exists():
        with open(SCIFACT, encoding="utf-8") as f:
            for line in f:
                record_ = json.loads(line)
                if record_["text"].strip():
                    out.append((f"scifact/{record_['_id']}", record_["text"]))
                if len(out) == n:
                    return out
    rng = random.Random(7)
    words = ["protein", "DNA", "cells", "HIV", "patients", "Mayo Clinic", "risk", "BMI", "trial", "RNA", "gene"]
    while len(out) < n:
        out.append((f"synthetic/{len(out)}", " ".join(rng.choice(words) for _ in range(60)) + "."))
    return out


def make_chunks(docs: Sequence[tuple[str, str]], scope: Scope | None = None) -> list[Chunk]:
    """One chunk per document, with a content-derived id like the chunkers make."""
    return [Chunk(chunk_id=make_chunk_id(doc, STRATEGY, "whole", 0, len(text), text), document_id=doc,
                  strategy=STRATEGY, text=text, start=0, end=len(text), token_count=len(text.split()), position=0,
                  scope=scope or Scope()) for doc, text in docs]


def ruler_nlp() -> Any:
    """A blank English pipeline: sentences, and acronyms (ORG) and title-case pairs (PERSON) as entities."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([
        {"label": "ORG", "pattern": [{"IS_UPPER": True, "IS_ALPHA": True, "LENGTH": {">=": 2}}]},
        {"label": "PERSON", "pattern": [{"IS_TITLE": True, "IS_SENT_START": False}, {"IS_TITLE": True}]},
    ])
    return nlp


def save_ruler_ner(path: Path) -> str:
    """``ruler_nlp`` saved to disk with its entity ruler named "ner", so NlpResource(model=path) loads it."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("entity_ruler", name="ner").add_patterns(ruler_nlp().get_pipe("entity_ruler").patterns)
    nlp.to_disk(path)
    return str(path)


def ingest_defs(settings: Any, prefix: str, work: Path, nlp_path: str) -> Any:
    """The repo's Definitions for the recursive strategy, resources on ``settings``' stack, secrets as EnvVar
    (read from RAGLOOM_WEAVIATE_API_KEY / RAGLOOM_NEO4J_PASSWORD at run time, as default_resources does)."""
    import dataclasses
    import shutil

    from dagster import EnvVar

    from pipelines.definitions import build_defs
    from ragloom.settings import SAMPLE_CORPUS
    from resources import EmbedderResource, Neo4jResource, NlpResource, WeaviateResource, default_resources

    docs = work / "docs"
    if not docs.exists():
        shutil.copytree(SAMPLE_CORPUS, docs)
    resources = {
        **default_resources(work),
        "weaviate": WeaviateResource(host=settings.weaviate_host, http_port=settings.weaviate_http_port,
                                     grpc_port=settings.weaviate_grpc_port, url="",
                                     api_key=EnvVar("RAGLOOM_WEAVIATE_API_KEY"), collection_prefix=prefix),
        "neo4j": Neo4jResource(uri=settings.resolved_neo4j_uri, password=EnvVar("RAGLOOM_NEO4J_PASSWORD"),
                               namespace=prefix.lower()),
        "embedder": EmbedderResource(backend="onnx-int8"),  # no torch import in the run workers: faster start
        "nlp": NlpResource(model=nlp_path),
    }
    one = dataclasses.replace(settings, chunkings=(STRATEGY,), graph_chunkings=(STRATEGY,))
    return build_defs(one, resources)


def settings_env(settings: Any) -> dict[str, str]:
    """The RAGLOOM_* environment that makes Settings.from_env() point at ``settings``' stack (secrets included)."""
    return {
        "RAGLOOM_DATA_DIR": str(settings.data_dir),
        "RAGLOOM_CACHE_DIR": str(settings.cache_dir),
        "RAGLOOM_WEAVIATE_HTTP_PORT": str(settings.weaviate_http_port),
        "RAGLOOM_WEAVIATE_GRPC_PORT": str(settings.weaviate_grpc_port),
        "RAGLOOM_WEAVIATE_API_KEY": settings.weaviate_api_key,
        "RAGLOOM_NEO4J_BOLT_PORT": str(settings.neo4j_bolt_port),
        "RAGLOOM_NEO4J_HTTP_PORT": str(settings.neo4j_http_port),
        "RAGLOOM_NEO4J_PASSWORD": settings.neo4j_password,
        "RAGLOOM_COLLECTION_PREFIX": settings.collection_prefix,
        "RAGLOOM_GRAPH_NAMESPACE": settings.graph_namespace,
    }


def environ_without_ragloom() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}


def people_nlp(people: Iterable[str], company: str) -> Any:
    """A spaCy pipeline that recognizes exactly these people and the company, at ingestion and in queries alike."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("entity_ruler").add_patterns(
        [{"label": "PERSON", "pattern": n} for n in people] + [{"label": "ORG", "pattern": company}])
    return nlp

