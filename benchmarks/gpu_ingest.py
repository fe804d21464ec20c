"""Vector ingestion on a GPU: SciFact chunks through ragloom's embedder as `device=auto` builds it, in chunks/s.

Prints the plan the factory chose (backend, device, batch size, dtype), embed-only chunks/s with it, a sweep of
batch sizes and dtypes (each a separately built embedder), the cosine of the GPU vectors to the CPU onnx-int8
vectors of the same chunks (one vector family: collections built here serve a CPU query side), and with
``--write`` embed + Weaviate write (`sync_vectors` into a fresh collection, the stack started if needed). The
baseline in the same run: the same embedder on the same machine's CPU (torch fp32, a sample). Aim on one
H100/H200: >= 2,500 chunks/s.

With ``--schemas shipped,previous`` each write runs on the shipped collection schema and on the indexes it had
before 2026-11-26, in turn (``weaviate_write.schema_of``). ``--write-processes 1,2,4`` runs each write with its batch
writes in that many processes (RAGLOOM_WEAVIATE_WRITE_PROCESSES; 1: the syncing process).

    python benchmarks/gpu_ingest.py [--documents 0] [--batches 256,512,1024] [--dtypes fp32,fp16,bf16] [--write]
        [--write-requests 1,2,4,8] [--write-processes 0] [--schemas shipped] [--write-repeats 1]
        [--writes-in-flight 0] [--sync-batch 256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from dataclasses import replace
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def chunks_of(data: Path, documents: int, model: str = "") -> list:
    """The first ``documents`` abstracts (0: all), chunked recursively with ``model``'s tokenizer ('' = the default
    model's)."""
    from ragloom.chunking import RecursiveChunker
    from ragloom.chunking.tokens import get_token_counter
    from ragloom.types import Document, sha256_hex

    docs = []
    with (data / "corpus.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            text = f"{r['title']}\n\n{r['text']}"
            docs.append(Document(document_id=r["_id"], title=r["title"], text=text, source_path="corpus.jsonl",
                                 format="jsonl", content_hash=sha256_hex(text)))
            if len(docs) == documents:
                break
    return RecursiveChunker(counter=get_token_counter(model)).chunk_many(docs)


def rate(embedder, texts: list[str], call: int = 4096, repeats: int = 1) -> float:
    """Median chunks/s of ``repeats`` passes over ``texts`` in calls of ``call`` texts, after a warm-up call of
    ``call`` texts spread over every length (a GPU plans its kernels per padded shape: 256 short texts left the
    first pass 35-45% slow on an H100, docs/experiments/2026-11-26-gpu-ingest.md)."""
    embedder.encode(texts[:: max(1, len(texts) // call)][:call])
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        for begin in range(0, len(texts), call):
            embedder.encode(texts[begin:begin + call])
        rates.append(len(texts) / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--documents", type=int, default=0, help="first N abstracts (0 = all 5,183)")
    parser.add_argument("--batches", default="256,512,1024")
    parser.add_argument("--dtypes", default="fp32,fp16,bf16")
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per embedder (the median is printed)")
    parser.add_argument("--cpu-sample", type=int, default=300, help="chunks for the CPU baseline")
    parser.add_argument("--write", action="store_true", help="also embed + write into Weaviate")
    parser.add_argument("--write-requests", default="1",
                        help="insert requests in flight (RAGLOOM_WEAVIATE_WRITE_REQUESTS), one write run per value")
    parser.add_argument("--write-processes", default="0",
                        help="processes the batch writes run in (RAGLOOM_WEAVIATE_WRITE_PROCESSES; 0 = by cores)")
    parser.add_argument("--sync-batch", type=int, default=256, help="sync_vectors' batch_size (ingestion's: 256)")
    parser.add_argument("--schemas", default="shipped", help="shipped and/or previous (the indexes before)")
    parser.add_argument("--write-repeats", type=int, default=1, help="rounds of the write runs")
    parser.add_argument("--writes-in-flight", default="0",
                        help="batch writes at once (sync_vectors' writes_in_flight; 0 = its default), one run each")
    args = parser.parse_args()

    from ragloom.embedding import EmbedderParams, make_embedder
    from ragloom.embedding.factory import cuda_present, plan
    from ragloom.settings import Settings

    # RAGLOOM_EMBED_MODEL: a device machine gets the model as a folder, not as the PyPI package
    settings = Settings.from_env()
    model = settings.embed_model
    chunks = chunks_of(args.data, args.documents, model)
    texts = [c.embed_text for c in chunks]
    print(f"SciFact: {len(chunks)} chunks; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"CUDA present: {cuda_present()}", flush=True)
    if not cuda_present():
        print("no CUDA GPU here: the figures below are the CPU's (device=auto resolves to cpu)", flush=True)
    chosen = plan(EmbedderParams(model=model))
    print(f"device=auto plan: {chosen}", flush=True)
    auto = make_embedder(EmbedderParams(model=model), reuse=False)
    auto_rate = rate(auto, texts, repeats=args.repeats)
    print(f"auto      {auto.model_id}: {auto_rate:8.1f} chunks/s", flush=True)

    cpu = make_embedder({"model": model, "backend": "torch", "device": "cpu", "dtype": "fp32"}, reuse=False)
    sample = texts[: args.cpu_sample]
    cpu_rate = rate(cpu, sample, call=256)
    print(f"baseline  the same machine's CPU, torch fp32 ({len(sample)} chunks): {cpu_rate:8.1f} chunks/s -> "
          f"auto x{auto_rate / cpu_rate:.1f}", flush=True)

    int8 = make_embedder({"model": model, "backend": "onnx-int8", "device": "cpu"}, reuse=False)
    ours = auto.encode(sample)
    for name, reference in (("CPU torch fp32", cpu.encode(sample)), ("CPU onnx-int8", int8.encode(sample))):
        cos = (ours * reference).sum(axis=1)
        print(f"family    cosine of auto's vectors to {name} on {len(sample)} chunks: min {cos.min():.4f} "
              f"mean {cos.mean():.4f}", flush=True)

    if cuda_present():
        for dtype in [d for d in args.dtypes.split(",") if d]:
            for batch in [int(b) for b in args.batches.split(",") if b]:
                embedder = make_embedder({"model": model, "backend": "torch", "device": "cuda", "dtype": dtype,
                                          "batch_size": batch},
                                         reuse=False)
                r = rate(embedder, texts, repeats=args.repeats)
                print(f"sweep     torch {dtype} batch {batch:5d}: {r:8.1f} chunks/s", flush=True)
                del embedder

    if args.write:
        from ragloom.indexing.vectors import sync_vectors
        from ragloom.stack import weaviate as weaviate_server
        from ragloom.stores.weaviate import WeaviateStore

        if not settings.weaviate_url:  # only the vector store: the graph plays no part in vector ingest
            settings = replace(settings, weaviate_api_key=settings.weaviate_api_key or uuid.uuid4().hex)
            print(f"weaviate  ready in {weaviate_server.start(settings, settings.weaviate_api_key):.1f}s", flush=True)
        from weaviate_write import check_schema, schema_of

        runs = [(requests, processes, schema, depth) for _ in range(args.write_repeats)
                for requests in [int(n) for n in args.write_requests.split(",") if n]
                for processes in [int(n) for n in args.write_processes.split(",") if n]
                for schema in [n for n in args.schemas.split(",") if n]
                for depth in [int(n) for n in args.writes_in_flight.split(",") if n]]
        for requests, processes, schema, depth in runs:
            store = WeaviateStore.connect(replace(settings, collection_prefix=f"BenchGpu{uuid.uuid4().hex[:8]}",
                                                  weaviate_write_requests=requests,
                                                  weaviate_write_processes=processes))
            try:
                with schema_of(schema):
                    report = sync_vectors(store, auto, "recursive", chunks, batch_size=args.sync_batch,
                                          writes_in_flight=depth)
                check_schema(store, "recursive", schema)
                assert store.count("recursive") == len(chunks), "the collection does not hold every chunk"
            finally:
                store.drop_collections()
                store.close()
            print(f"write     embed + write, {schema} schema, {report.write_processes} writer processes, "
                  f"{depth or 'default'} writes of {store.requests_per_write} insert requests in flight "
                  f"(RAGLOOM_WEAVIATE_WRITE_REQUESTS={requests}): "
                  f"{len(chunks) / report.seconds:8.1f} chunks/s (embed {report.embed_seconds:.1f}s, write "
                  f"{report.write_seconds:.1f}s overlapped; load average {os.getloadavg()[0]:.1f})   aim >= 2,500",
                  flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
