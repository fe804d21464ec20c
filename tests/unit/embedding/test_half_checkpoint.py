"""A checkpoint stored in fp16 or bf16 still exports to ONNX (fp32 and int8) and embeds like its fp32 weights."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_models import build_encoder

from ragloom.embedding.onnx import OnnxEmbedder
from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

TEXTS = ["protein binding in tumour cells", "gene expression of the receptor", "blood heart brain", "cell"]


@pytest.fixture(scope="module")
def fp32_vectors(tmp_path_factory) -> np.ndarray:
    folder = build_encoder(tmp_path_factory.mktemp("fp32") / "model", "fp32")
    return OnnxEmbedder(str(folder), cache_dir=folder.parent / "cache").encode(TEXTS)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("quantized", [False, True])
def test_a_half_precision_checkpoint_exports_from_fp32(tmp_path, fp32_vectors, dtype, quantized):
    import onnx

    folder = build_encoder(tmp_path / "model", dtype)
    embedder = OnnxEmbedder(str(folder), quantized=quantized, cache_dir=tmp_path / "cache")
    graph = onnx.load(str(embedder.onnx_path)).graph
    assert all(t.data_type == onnx.TensorProto.FLOAT for t in graph.initializer if t.data_type in (
        onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16))
    vectors = embedder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == fp32_vectors.shape
    # The weights rounded to half precision: the same model within that rounding (int8 adds its own).
    assert (vectors * fp32_vectors).sum(axis=1).min() > (0.95 if quantized else 0.999)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_the_torch_embedder_runs_a_half_checkpoint_in_fp32_when_asked(tmp_path, fp32_vectors, dtype):
    import torch

    embedder = SentenceTransformerEmbedder(str(build_encoder(tmp_path / "model", dtype)), device="cpu")
    assert {p.dtype for p in embedder._model.parameters()} == {torch.float32}
    assert embedder.model_id.endswith("|torch|32")  # no precision suffix: it is fp32
    assert (embedder.encode(TEXTS) * fp32_vectors).sum(axis=1).min() > 0.999
