"""Embedders: the ONNX backends agree with the PyTorch reference on real SciFact abstracts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ragloom.embedding import EmbedderParams, make_embedder
from ragloom.embedding.base import same_family
from ragloom.embedding.factory import DEFAULT_BATCH
from ragloom.embedding.onnx import FP32_FILE, ModelLayout, OnnxEmbedder, _build_atomically, local_model_dir
from ragloom.errors import ConfigError, EmbeddingError


@pytest.fixture(scope="module")
def abstracts(scifact_jsonl_lines: list[str]) -> list[str]:
    records = [json.loads(line) for line in scifact_jsonl_lines[:10]]
    return [f"{r['title']}\n\n{r['text']}" for r in records]


@pytest.fixture(scope="module")
def torch_embedder():
    return make_embedder({"backend": "torch", "dtype": "fp32"})  # the reference (auto is bf16 on a CPU with AMX)


@pytest.fixture(scope="module")
def reference(abstracts, torch_embedder) -> np.ndarray:
    return torch_embedder.encode(abstracts)


@pytest.fixture(scope="module")
def onnx_embedder():
    return make_embedder({"backend": "onnx"})


@pytest.fixture(scope="module")
def int8_embedder():
    return make_embedder({"backend": "onnx-int8"})


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_onnx_fp32_matches_torch(abstracts, reference, onnx_embedder):
    vectors = onnx_embedder.encode(abstracts)
    assert vectors.shape == reference.shape == (len(abstracts), 384)
    assert vectors.dtype == np.float32
    assert _cosines(vectors, reference).min() > 0.9999


def test_openvino_runs_the_onnx_export_close_to_fp32_in_bf16_where_the_cpu_has_amx(abstracts, reference):
    """The openvino backend compiles the fp32 ONNX export: bf16 on a CPU with AMX-BF16, fp32 elsewhere. Its vectors
    are of the family; its one-thread sibling gives the same vectors bit for bit; a bad file is a clear error."""
    from ragloom.embedding.factory import cpu_has_amx_bf16
    from ragloom.embedding.openvino import open_openvino

    amx = cpu_has_amx_bf16()
    embedder = make_embedder({"backend": "openvino", "device": "cpu"})
    assert embedder.model_id == f"all-MiniLM-L6-v2|openvino|384|torchscript-opset17-v1+{'bf16' if amx else 'fp32'}"
    assert same_family(embedder.model_id, make_embedder({"backend": "onnx-int8"}).model_id)
    vectors = embedder.encode(abstracts)
    assert vectors.dtype == np.float32 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    # measured on 2 Sapphire Rapids cores in bf16: min cosine 0.99997 on these abstracts (onnx-int8: 0.9917)
    assert _cosines(vectors, reference).min() > (0.999 if amx else 0.9999)
    single = embedder.single_threaded()
    assert single is not embedder and np.array_equal(single.encode(abstracts), vectors)
    assert embedder.encode([]).shape == (0, 384)
    # the service's query threads may share one embedder: each thread runs its own infer request
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda text: single.encode([text]), abstracts * 2))
    assert all(np.array_equal(out[0], single.encode([text])[0]) for out, text in zip(outs, abstracts * 2, strict=True))
    with pytest.raises(EmbeddingError, match="openvino could not compile"):
        open_openvino(Path(__file__), 1, "fp32")  # a Python file is no ONNX model
    with pytest.raises(EmbeddingError, match="not the int8 one"):
        OnnxEmbedder(quantized=True, runtime="openvino")


def test_torch_bf16_runs_where_the_cpu_has_amx_and_stays_close_to_fp32(abstracts, reference):
    from ragloom.embedding.factory import cpu_has_amx_bf16

    if not cpu_has_amx_bf16():  # emulated bf16 would be slower than fp32: refused, with the reason
        with pytest.raises(ConfigError, match="needs AMX-BF16"):
            make_embedder({"backend": "torch", "dtype": "bf16", "device": "cpu"})
        return
    bf16 = make_embedder({"backend": "torch", "dtype": "bf16", "device": "cpu"})
    assert bf16.model_id.endswith("|bf16")
    vectors = bf16.encode(abstracts)
    assert vectors.dtype == np.float32 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    # measured min 0.9964 / mean 0.9989 over 768 SciFact chunks (int8: 0.9865 / 0.9936)
    assert _cosines(vectors, reference).min() > 0.99


def test_the_torch_embedder_loads_its_model_at_the_first_encode(abstracts, reference):
    """Dimension, token limit and model id come from the folder; torch loads only when there is text to embed (a
    sync with nothing new never pays for it), and the loaded model agrees with what the folder said."""
    from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

    lazy = SentenceTransformerEmbedder(batch_size=32)
    assert lazy._loaded is None and (lazy.dimension, lazy.max_tokens) == (384, 256)
    assert lazy.encode([]).shape == (0, 384) and lazy._loaded is None
    eager = SentenceTransformerEmbedder(batch_size=32, lazy=False)
    assert eager._loaded is not None
    assert (lazy.model_id, lazy.dimension, lazy.max_tokens) == (eager.model_id, eager.dimension, eager.max_tokens)
    assert np.array_equal(lazy.encode(abstracts), reference) and lazy._loaded is not None


def test_onnx_int8_stays_close_to_torch(abstracts, reference, int8_embedder):
    cos = _cosines(int8_embedder.encode(abstracts), reference)
    # per-channel int8: measured min 0.990 / mean 0.995 on 128 abstracts (per-tensor would be ~0.90 / 0.94)
    assert cos.min() > 0.97
    assert cos.mean() > 0.985


def test_vectors_are_unit_length(abstracts, onnx_embedder, int8_embedder):
    for embedder in (onnx_embedder, int8_embedder):
        norms = np.linalg.norm(embedder.encode(abstracts[:5]), axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_length_sorting_restores_the_callers_order(abstracts, onnx_embedder):
    texts = ["a", abstracts[0], "short claim about cells", abstracts[3] * 2, abstracts[1][:200], ""]
    together = onnx_embedder.encode(texts)
    alone = np.vstack([onnx_embedder.encode([t]) for t in texts])
    # padding to the batch's longest text must not change any vector, and rows come back in input order
    assert _cosines(together, alone).min() > 0.99999
    reversed_rows = onnx_embedder.encode(texts[::-1])[::-1]
    assert _cosines(together, reversed_rows).min() > 0.99999


@pytest.mark.parametrize("limits", [{"batch_size": 2}, {"max_batch_tokens": 600}])  # 600 tokens: ~2 abstracts
def test_batches_smaller_than_the_input(abstracts, limits):
    small = OnnxEmbedder(**limits)
    big = make_embedder({"backend": "onnx"})
    assert _cosines(small.encode(abstracts[:5]), big.encode(abstracts[:5])).min() > 0.99999


def test_torch_batches_capped_by_tokens_give_the_same_vectors_in_the_callers_order(abstracts, torch_embedder):
    from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

    texts = [abstracts[0], "a short claim", abstracts[3] * 2, "", abstracts[1][:300], abstracts[2]]
    capped = SentenceTransformerEmbedder(batch_size=64, max_batch_tokens=300)  # one or two texts per model call
    assert capped.max_batch_tokens == 300
    assert _cosines(capped.encode(texts), torch_embedder.encode(texts)).min() > 0.9999
    with pytest.raises(EmbeddingError, match="tokenize"):
        capped.encode(["fine", 7])


def test_long_text_is_truncated_like_sentence_transformers(abstracts, torch_embedder, onnx_embedder):
    long_text = " ".join(abstracts)  # thousands of tokens; the model reads the first 256
    assert onnx_embedder.max_tokens == torch_embedder.max_tokens == 256
    cos = _cosines(onnx_embedder.encode([long_text]), torch_embedder.encode([long_text]))
    assert cos[0] > 0.9999


def test_single_threaded_sibling_gives_the_same_vectors_bit_for_bit(abstracts, int8_embedder, torch_embedder):
    names = ["Deutsche Bank", "Frankfurt", "Kim Jong-il", "Samuel Taylor Coleridge", "U.S. Senate", "Leone"] * 7
    single = int8_embedder.single_threaded()
    assert single is not int8_embedder and single.single_threaded() is single  # made once, then kept
    assert int8_embedder.single_threaded() is single and single.model_id == int8_embedder.model_id
    assert single._session.get_session_options().intra_op_num_threads == 1
    for texts in (names, abstracts[:40]):
        assert np.array_equal(single.encode(texts), int8_embedder.encode(texts))
    assert torch_embedder.single_threaded() is torch_embedder  # torch's thread count is process-wide
    one = OnnxEmbedder(quantized=True, batch_size=32, threads=1)
    assert one.single_threaded() is one


def test_the_api_embeds_queries_on_its_single_threaded_sibling(int8_embedder, monkeypatch):
    """A query is a short text: the API's embedder (the service's, the CLI's) is asked for as a query embedder
    (backend auto: onnx-int8 on a CPU) and is its one-thread sibling, coalesced or not; ingestion's embedders keep
    their threads."""
    import ragloom.embedding as embedding
    from ragloom.api import Ragloom

    asked = []
    monkeypatch.setattr(embedding, "make_embedder", lambda settings, **kw: asked.append(kw) or int8_embedder)
    single = int8_embedder.single_threaded()
    assert Ragloom(vectors=object()).context.embedder is single  # no store is called: it records no model
    assert asked == [{"short_texts": True}]
    with Ragloom(vectors=object(), coalesce_queries=True) as rag:
        assert rag.context.embedder.inner is single
    query = ["Do CD4+ T cells mediate the response to a first infection?"]
    assert np.array_equal(single.encode(query), int8_embedder.encode(query))


def test_empty_input(onnx_embedder, torch_embedder):
    assert onnx_embedder.encode([]).shape == (0, 384)
    assert torch_embedder.encode([]).shape == (0, 384)


def test_model_id_differs_per_backend(torch_embedder, onnx_embedder, int8_embedder):
    ids = {torch_embedder.model_id, onnx_embedder.model_id, int8_embedder.model_id}
    assert len(ids) == 3
    assert all("all-MiniLM-L6-v2" in i for i in ids)


def test_factory_reuses_a_loaded_model_and_reads_settings(onnx_embedder):
    from ragloom.settings import Settings

    assert make_embedder({"backend": "onnx"}) is onnx_embedder
    from_settings = make_embedder(Settings(embed_backend="onnx", cache_dir=onnx_embedder.onnx_path.parents[2]))
    assert from_settings is onnx_embedder
    assert make_embedder({"backend": "onnx", "batch_size": 7}).batch_size == 7


@pytest.mark.parametrize("params, message", [
    ({"backend": "tensorflow"}, "backend"),
    ({"backend": "onnx", "device": "tpu"}, "device"),
    ({"backend": "onnx", "batch_size": -1}, "batch size"),
    ({"backend": "onnx", "dtype": "int4"}, "dtype"),
    ({"backend": "onnx", "normalize": False}, "unknown embedder parameter"),
])
def test_factory_rejects_bad_params(params, message):
    with pytest.raises(ConfigError, match=message):
        make_embedder(params)


def test_cuda_is_used_when_present_and_refused_when_absent():
    import torch

    from ragloom.embedding.factory import cuda_present

    assert cuda_present() == torch.cuda.is_available()
    if torch.cuda.is_available():
        embedder = make_embedder(EmbedderParams(device="auto"))  # the default backend, onnx-int8, asked for
        assert embedder.encode(["x"]).shape == (1, 384)
        assert str(embedder._model.device).startswith("cuda") and embedder.backend == "torch"
    else:
        with pytest.raises(EmbeddingError, match="no CUDA GPU"):
            make_embedder({"backend": "torch", "device": "cuda"})
        embedder = make_embedder({"backend": "onnx", "device": "auto"})
        assert embedder.encode(["x"]).shape == (1, 384) and embedder.batch_size == DEFAULT_BATCH["cpu"]


@pytest.mark.parametrize("params, gpu, onnx_gpu, amx, expected", [
    # device auto: the GPU when there is one, with torch in the ONNX backends' place when onnxruntime has no CUDA
    ({}, False, False, False, ("onnx-int8", "cpu", 32, "fp32")),
    ({}, True, False, False, ("torch", "cuda", 512, "fp16")),
    ({}, True, True, False, ("onnx-int8", "cuda", 512, "fp32")),  # the default, onnx-int8, where it has CUDA
    ({"backend": "auto"}, True, True, True, ("torch", "cuda", 512, "fp16")),  # auto: torch on a GPU
    ({"backend": "torch"}, True, False, False, ("torch", "cuda", 512, "fp16")),
    # a CPU with AMX-BF16: the default stays onnx-int8; auto takes openvino in bf16 for passages (short texts: the
    # next test)
    ({}, False, False, True, ("onnx-int8", "cpu", 32, "fp32")),
    ({"backend": "auto"}, False, False, True, ("openvino", "cpu", 32, "bf16")),
    ({"backend": "auto"}, False, False, False, ("onnx-int8", "cpu", 32, "fp32")),
    ({"backend": "torch", "device": "cpu"}, True, False, True, ("torch", "cpu", 32, "fp32")),  # by name: fp32
    ({"backend": "auto", "device": "cpu"}, True, False, True, ("openvino", "cpu", 32, "bf16")),
    # openvino by name: bf16 where the CPU has AMX-BF16, fp32 elsewhere; on a GPU under device auto, torch
    ({"backend": "openvino"}, False, False, True, ("openvino", "cpu", 32, "bf16")),
    ({"backend": "openvino"}, False, False, False, ("openvino", "cpu", 32, "fp32")),
    ({"backend": "openvino"}, True, True, False, ("torch", "cuda", 512, "fp16")),
    ({"backend": "auto", "dtype": "bf16"}, False, False, True, ("openvino", "cpu", 32, "bf16")),
    ({"backend": "torch"}, False, False, False, ("torch", "cpu", 32, "fp32")),
    ({"backend": "onnx-int8"}, False, False, True, ("onnx-int8", "cpu", 32, "fp32")),  # asked for: kept
    # settings override batch size, dtype and device
    ({"batch_size": 1024, "dtype": "bf16"}, True, False, False, ("torch", "cuda", 1024, "bf16")),
    ({"device": "cpu"}, True, False, False, ("onnx-int8", "cpu", 32, "fp32")),
    ({"backend": "auto", "dtype": "fp32"}, False, False, True, ("openvino", "cpu", 32, "fp32")),
    ({"device": "cuda:1", "backend": "torch", "dtype": "fp32"}, True, False, False, ("torch", "cuda:1", 512, "fp32")),
])
def test_backend_batch_and_dtype_follow_the_device(params, gpu, onnx_gpu, amx, expected):
    from ragloom.embedding.factory import plan

    chosen = plan(EmbedderParams(**params), has_cuda=gpu, onnx_cuda=onnx_gpu, has_amx=amx)
    assert (chosen.backend, chosen.device, chosen.batch_size, chosen.dtype) == expected


@pytest.mark.parametrize("gpu, amx, expected", [
    (False, True, ("onnx-int8", "fp32")),  # AMX: openvino embeds batches, onnx-int8 (one thread) queries
    (False, False, ("onnx-int8", "fp32")),
    (True, True, ("torch", "fp16")),  # a GPU embeds queries too
])
def test_backend_auto_embeds_queries_with_the_fastest_backend_for_one_text(gpu, amx, expected):
    from ragloom.embedding.factory import plan

    chosen = plan(EmbedderParams(backend="auto"), short_texts=True, has_cuda=gpu, onnx_cuda=False, has_amx=amx)
    assert (chosen.backend, chosen.dtype) == expected


@pytest.mark.parametrize("params, gpu, amx, error, message", [
    ({"device": "cuda"}, False, False, EmbeddingError, "no CUDA GPU"),
    ({"device": "cuda", "backend": "onnx"}, True, False, EmbeddingError, "onnxruntime-gpu"),  # asked for explicitly
    ({"dtype": "fp16", "backend": "auto"}, False, False, ConfigError, "fp16 needs a GPU"),
    ({"dtype": "fp16", "backend": "auto"}, False, True, ConfigError, "fp16 needs a GPU"),  # AMX: bf16, not fp16
    ({"dtype": "bf16", "backend": "torch"}, False, False, ConfigError, "needs AMX-BF16"),
    ({"dtype": "fp16", "backend": "onnx-int8", "device": "cpu"}, True, False, ConfigError, "not one the onnx-int8"),
    ({"dtype": "bf16", "backend": "onnx"}, False, True, ConfigError, "not one the onnx backend"),
    ({"dtype": "fp16", "backend": "openvino", "device": "cpu"}, False, True, ConfigError, "not one the openvino"),
    ({"dtype": "bf16", "backend": "openvino"}, False, False, ConfigError, "needs AMX-BF16"),
    ({"backend": "openvino", "device": "cuda"}, True, False, EmbeddingError, "runs on the CPU only"),
])
def test_impossible_device_plans_are_clear_errors(params, gpu, amx, error, message):
    from ragloom.embedding.factory import plan

    with pytest.raises(error, match=message):
        plan(EmbedderParams(**params), has_cuda=gpu, onnx_cuda=False, has_amx=amx)


def test_amx_is_read_from_the_cpu_flags():
    from ragloom.embedding.factory import cpu_has_amx_bf16

    flags = next((line.split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    assert cpu_has_amx_bf16() == ("amx_bf16" in flags)


def test_export_is_cached_and_reused(onnx_embedder):
    before = os.stat(onnx_embedder.onnx_path).st_mtime_ns
    again = OnnxEmbedder(cache_dir=onnx_embedder.onnx_path.parents[2])
    assert again.onnx_path == onnx_embedder.onnx_path
    assert os.stat(again.onnx_path).st_mtime_ns == before
    fingerprint = ModelLayout(local_model_dir("")).fingerprint()
    assert onnx_embedder.onnx_path.parent.name == fingerprint


def test_a_failed_build_leaves_no_file(tmp_path: Path):
    target = tmp_path / FP32_FILE

    def crash(staged: Path) -> None:
        staged.write_bytes(b"half an onnx file")
        raise RuntimeError("exporter died")

    with pytest.raises(EmbeddingError, match="exporter died"):
        _build_atomically(target, crash, "ONNX export")
    assert list(tmp_path.iterdir()) == []


def test_missing_model_is_a_clear_error(tmp_path: Path):
    with pytest.raises(EmbeddingError, match="local model directory"):
        OnnxEmbedder(str(tmp_path / "no-such-model"), cache_dir=tmp_path)
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(EmbeddingError, match="config.json"):
        OnnxEmbedder(str(tmp_path / "empty-model"), cache_dir=tmp_path)
