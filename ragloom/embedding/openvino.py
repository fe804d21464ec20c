"""OpenVINO running the model's fp32 ONNX export, in bf16 on a CPU with AMX-BF16.

Intel's OpenVINO reads the same ONNX file the onnx backend runs and compiles it for this CPU. Asked for bf16,
it multiplies in the AMX tile unit of Sapphire Rapids and later Xeons: on two such cores it embedded SciFact's
chunks ~1.9x as fast as onnxruntime's int8 model (1.7x with the Weaviate writes), with vectors closer to fp32's,
and it loads in under a second without PyTorch (docs/experiments/2026-11-28-openvino-bf16-embedder.md).
Elsewhere it runs fp32, which is slower than the int8 default, so ``backend=auto`` picks it only where the CPU
has AMX-BF16.

This module is the only one that imports openvino; ``OnnxEmbedder`` does the tokenizing, batching and pooling
and calls the session made here as it calls an onnxruntime one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.errors import EmbeddingError

PRECISIONS = {"fp32": "f32", "bf16": "bf16"}  # our dtype names -> OpenVINO's inference precision hint


class _Input:
    def __init__(self, name: str) -> None:
        self.name = name


class OpenVinoSession:
    """A compiled model with onnxruntime's two session calls (``get_inputs``, ``run``). Safe to call from several
    threads: each thread has its own infer request (an OpenVINO request serves one inference at a time)."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._names = [port.get_any_name() for port in compiled.inputs]
        self._requests = threading.local()

    def get_inputs(self) -> list[_Input]:
        return [_Input(name) for name in self._names]

    def run(self, _outputs: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self._compiled.create_infer_request()
        result = request.infer(feed)
        return [result[0]]  # a copy: infer() does not share the request's output tensor by default


def open_openvino(onnx_path: Path, threads: int, dtype: str) -> OpenVinoSession:
    """The ONNX file compiled for this CPU with ``threads`` inference threads, computing in ``dtype``
    (fp32 or bf16); EmbeddingError when openvino is missing or cannot compile it."""
    if dtype not in PRECISIONS:
        raise EmbeddingError(f"the openvino backend computes in {' or '.join(PRECISIONS)}, not {dtype}")
    try:
        import openvino  # deferred: only the openvino backend loads it
    except ImportError as e:
        raise EmbeddingError("the openvino backend needs the openvino package (pip install openvino)") from e
    try:
        core = openvino.Core()
        model = core.read_model(str(onnx_path))
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": PRECISIONS[dtype],
                                                     "INFERENCE_NUM_THREADS": int(threads),
                                                     "PERFORMANCE_HINT": "LATENCY"})
    except Exception as e:  # openvino raises RuntimeError subclasses of its own on a bad file or property
        raise EmbeddingError(f"openvino could not compile {onnx_path}: {e}") from e
    return OpenVinoSession(compiled)
