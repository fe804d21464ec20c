"""Which model ids give vectors of one family, and which embedder the query side builds for recorded ones."""

from __future__ import annotations

import pytest

from ragloom.embedding.base import backend_of, model_family, same_family
from ragloom.embedding.factory import EmbedderParams, follow_recorded
from ragloom.errors import ConfigError

TORCH = "all-MiniLM-L6-v2|torch|384"
TORCH_FP16 = "all-MiniLM-L6-v2|torch|384|fp16"
INT8 = "all-MiniLM-L6-v2|onnx-int8|384|torchscript-opset17-v1+fused-dynamic-qint8-per-channel-v2"
INT8_V1 = "all-MiniLM-L6-v2|onnx-int8|384|torchscript-opset17-v1+dynamic-qint8-per-channel-v1"
FP32 = "sentence-transformers/all-MiniLM-L6-v2|onnx|384|torchscript-opset17-v1"
OTHER = "/models/e5-small|torch|384"
OPENVINO = "all-MiniLM-L6-v2|openvino|384|torchscript-opset17-v1+bf16"


@pytest.mark.parametrize("a, b", [(TORCH, INT8), (TORCH_FP16, INT8_V1), (INT8, INT8_V1), (FP32, TORCH),
                                  (OPENVINO, INT8), (OTHER, OTHER), ("test-model", "test-model")])
def test_backends_of_one_model_are_one_family(a, b):
    assert same_family(a, b) and same_family(b, a)


@pytest.mark.parametrize("a, b", [(TORCH, OTHER), (INT8, "all-MiniLM-L6-v2|onnx-int8|768|x"), ("a", "b"),
                                  (TORCH, "all-MiniLM-L6-v2|tensorflow|384"), (TORCH, "")])
def test_other_models_dimensions_or_unknown_backends_are_not(a, b):
    assert not same_family(a, b) and not same_family(b, a)


def test_family_and_backend_of_an_id():
    assert model_family(FP32) == model_family(TORCH_FP16) == "all-MiniLM-L6-v2|384"
    assert model_family("free text") is None
    assert backend_of(INT8) == ("", "onnx-int8") and backend_of(OTHER) == ("/models/e5-small", "torch")
    assert backend_of(OPENVINO) == ("", "openvino")
    assert backend_of("free text") is None


def test_the_query_side_follows_the_recorded_model():
    params = EmbedderParams(backend="onnx-int8", device="cpu", batch_size=32)
    # built on a GPU with torch, queried on a CPU with int8: the configured embedder serves
    assert follow_recorded(params, INT8, {"C1": TORCH_FP16, "C2": TORCH}) is None
    assert follow_recorded(params, INT8, {}) is None
    # indexed with another model: its embedder, the other settings kept
    follow = follow_recorded(params, INT8, {"C1": OTHER, "C2": OTHER})
    assert follow == EmbedderParams(backend="torch", model="/models/e5-small", device="cpu", batch_size=32)


@pytest.mark.parametrize("recorded, message", [
    ({"C1": OTHER, "C2": TORCH}, "different models"),
    ({"C1": OTHER, "C2": "/models/bge|torch|768"}, "different models"),
    ({"C1": "a-model-from-elsewhere"}, "no embedding backend"),
])
def test_collections_no_one_embedder_can_search_are_a_clear_error(recorded, message):
    with pytest.raises(ConfigError, match=message):
        follow_recorded(EmbedderParams(), INT8, recorded)
