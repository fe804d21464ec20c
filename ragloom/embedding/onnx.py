"""The ONNX Runtime embedder: the same weights exported locally to ONNX (fp32, or int8 dynamically quantized).

The export runs once per model and is cached under ``<cache_dir>/onnx/<fingerprint>/``; the fingerprint
hashes the weights, the model config and the export recipe, so a changed model or recipe re-exports.
Tokenization uses the model's ``tokenizer.json`` (the Rust `tokenizers` library); pooling and
normalization run in numpy, mirroring the model's sentence-transformers Pooling/Normalize modules.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.embedding.base import DEFAULT_MODEL_NAME, Embedder, resolve_model_path, tokenizer_file
from ragloom.errors import EmbeddingError
from ragloom.settings import Settings, usable_cpus

# Bump when the export or quantization recipe changes: a new fingerprint, a new model_id, no mixed vectors.
EXPORT_RECIPE = "torchscript-opset17-v1"
QUANT_RECIPE = "dynamic-qint8-per-channel-v1"
OPSET = 17
MAX_BATCH_TOKENS = 8192  # padded tokens per model call
FP32_FILE = "model.onnx"
RUNTIMES = ("onnxruntime", "openvino")
INT8_FILE = f"model-int8-{QUANT_RECIPE}.onnx"


def local_model_dir(model: str) -> Path:
    """A local directory for a model name or path; names are looked up in the local HF cache only."""
    path = Path(resolve_model_path(model)).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(model), local_files_only=True))
    except Exception as e:  # not cached / not a repo id: both mean "nothing local to export"
        raise EmbeddingError(f"the onnx backend needs a local model directory; {model!r} is neither a directory "
                             f"nor in the local Hugging Face cache ({e})") from e


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


class ModelLayout:
    """What sentence-transformers would do with a model directory: transformer folder, pooling, limits."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        modules = _read_json(model_dir / "modules.json") if (model_dir / "modules.json").exists() else []
        types = {m.get("type", "").rsplit(".", 1)[-1]: m.get("path", "") for m in modules} if modules else {}
        self.module_kinds = sorted(m.get("type", "").rsplit(".", 1)[-1] for m in modules)  # e.g. Pooling, Transformer
        self.transformer_dir = model_dir / types.get("Transformer", "")
        pooling = _read_json(model_dir / types["Pooling"] / "config.json") if "Pooling" in types else {}
        self.pooling = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
        if any(pooling.get(k) for k in ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                        "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")):
            raise EmbeddingError(f"{model_dir}: only mean or CLS pooling is supported by the onnx backend")
        # Vectors are always L2-normalized (the Embedder contract), with or without a Normalize module.
        config = _read_json(self.transformer_dir / "config.json")
        if not config:
            raise EmbeddingError(f"{self.transformer_dir} has no config.json: not a transformers model directory")
        self.dimension = int(config.get("hidden_size") or 0)
        limit = int(config.get("max_position_embeddings") or 512)
        self.max_tokens = limit
        for name, key in (("sentence_bert_config.json", "max_seq_length"),
                          ("tokenizer_config.json", "model_max_length")):
            value = _read_json(model_dir / name).get(key)
            if isinstance(value, int) and 0 < value < 100_000:
                self.max_tokens = min(value, limit)
                break
        tok = tokenizer_file(str(self.transformer_dir)) or tokenizer_file(str(model_dir))
        if tok is None:
            raise EmbeddingError(f"{model_dir} has no tokenizer.json: the onnx backend tokenizes with it")
        self.tokenizer_path = tok

    def fingerprint(self, head: str = "encoder") -> str:
        """Hash of the weights, config, export recipe and exported head (weights are hashed by content:
        ~0.1 s for 90 MB)."""
        h = hashlib.sha256(EXPORT_RECIPE.encode())
        if head != "encoder":  # the embedder's fingerprints (and cached exports) stay what they were
            h.update(head.encode())
        stored = _read_json(self.transformer_dir / "config.json")
        if (stored.get("dtype") or stored.get("torch_dtype")) in ("float16", "bfloat16"):
            h.update(b"loaded-as-fp32")  # exports of half checkpoints made before the fix are not reused
        weights = sorted(p for p in self.transformer_dir.iterdir()
                         if p.suffix in (".safetensors", ".bin") and p.is_file())
        if not weights:
            raise EmbeddingError(f"{self.transformer_dir} has no weights (*.safetensors or *.bin)")
        for path in [self.transformer_dir / "config.json", *weights]:
            h.update(path.name.encode())
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        return h.hexdigest()[:24]


# What an export takes from the transformers model: the bare encoder's last hidden state (embedders), or
# a sequence-classification head's logits (cross-encoders).
HEADS = {"encoder": "last_hidden_state", "classifier": "logits"}


def _export_fp32(transformer_dir: Path, target: Path, head: str = "encoder") -> list[str]:
    """torch.onnx.export of the transformer with ``head`` (see HEADS); returns the graph's input names."""
    import inspect

    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification

    auto = AutoModel if head == "encoder" else AutoModelForSequenceClassification
    try:
        # Always fp32, whatever the checkpoint's storage dtype: an fp16/bf16 graph quantizes into int8 scales of
        # that type, which onnxruntime's DequantizeLinear refuses, and the CPU runs fp32 anyway.
        model = auto.from_pretrained(str(transformer_dir), attn_implementation="eager", dtype=torch.float32).eval()
    except Exception as e:  # transformers raises many kinds; all mean "cannot load"
        raise EmbeddingError(f"could not load {transformer_dir} for ONNX export: {e}") from e
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    class Positional(torch.nn.Module):
        # transformers 5 clashes with the exporter on keyword-only extras (use_cache): take inputs positionally.
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs, strict=True)), return_dict=False)[0]

    dummy = torch.ones((2, 16), dtype=torch.long)
    args = tuple(torch.zeros_like(dummy) if n == "token_type_ids" else dummy for n in names)
    output = HEADS[head]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes[output] = {0: "batch", 1: "sequence"} if head == "encoder" else {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(Positional(model), args, str(target), dynamo=False, input_names=names,
                          output_names=[output], dynamic_axes=axes, opset_version=OPSET,
                          do_constant_folding=True)
    return names


def export_model(layout: ModelLayout, cache_dir: Path, quantized: bool, head: str = "encoder") -> Path:
    """The cached ONNX file for this model and ``head`` (exporting, and quantizing, on first use); safe
    across processes.

    Each file is written under a temporary name in the same directory and renamed into place, so a crash
    mid-export leaves no half file that a later run would load.
    """
    if head not in HEADS:
        raise EmbeddingError(f"unknown export head {head!r}; use {', '.join(HEADS)}")
    folder = cache_dir / "onnx" / layout.fingerprint(head)
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / FP32_FILE
    if not fp32.exists():
        _build_atomically(fp32, lambda staged: _export_fp32(layout.transformer_dir, staged, head), "ONNX export")
    if not quantized:
        return fp32
    int8 = folder / INT8_FILE
    if not int8.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # per_channel keeps the mean cosine to fp32 at 0.995 on SciFact abstracts (per-tensor: 0.937). onnxruntime
        # fuses the quantized graph's operators itself when it loads it (ORT_ENABLE_ALL); fusing the transformer
        # blocks offline first (onnxruntime.transformers' optimizer, QAttention) was measured no faster on 2 AVX-512
        # VNNI cores (docs/experiments/2026-11-26-ingest-hardware-limit.md).
        with _without_preprocess_advice():
            _build_atomically(int8, lambda staged: quantize_dynamic(str(fp32), str(staged), per_channel=True,
                                                                    weight_type=QuantType.QInt8), "int8 quantization")
    return int8


class _PreprocessAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _without_preprocess_advice() -> Iterator[None]:
    """quantize_dynamic logs (on the root logger) advice to run onnxruntime's shape-inference pre-processing
    first. The int8 model is quantized from the export as it is, which is what its quality was measured on, so
    the advice is noise on a user's first run; only that record is dropped, only during the call."""
    root, advice = logging.getLogger(), _PreprocessAdvice()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def _build_atomically(target: Path, build: Callable[[Path], object], what: str) -> None:
    """Run ``build(staged_path)`` in a private temp dir beside ``target``, then rename the result into place."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        staged = Path(tmp) / target.name
        try:
            build(staged)
        except EmbeddingError:
            raise
        except Exception as e:  # the exporter and quantizer fail in many ways; all mean "no model file"
            raise EmbeddingError(f"{what} into {target.parent} failed: {e}") from e
        os.replace(staged, target)  # atomic; a concurrent builder's identical file may win, which is fine


def open_session(onnx_path: Path, threads: int | None = None, cuda: bool = False) -> Any:
    """An ONNX Runtime session tuned for a shared machine (raises EmbeddingError on a bad file)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or usable_cpus()  # the right intra-op width on a shared machine
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Busy-waiting threads steal the shared cores from the Weaviate server we write to.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = ["CPUExecutionProvider"]
    if cuda:
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise EmbeddingError("device 'cuda' asked for, but this onnxruntime has no CUDAExecutionProvider "
                                 "(install onnxruntime-gpu, or use the torch backend on GPU)")
        providers.insert(0, "CUDAExecutionProvider")
    try:
        return ort.InferenceSession(str(onnx_path), options, providers=providers)
    except Exception as e:  # onnxruntime raises bare exceptions on a bad file
        raise EmbeddingError(f"could not load {onnx_path}: {e}") from e


def padded_batches(encodings: Sequence[Any], pad_id: int, batch_size: int, max_batch_tokens: int
                   ) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Tokenizer encodings in batches of like length, longest first: (their indexes, the padded model inputs).

    Activations grow with batch x width^2: the tokens per call are capped so long texts get smaller batches
    (peak RSS ~0.7 GB instead of ~1.2 GB at 64 x 256 tokens) and short ones keep ``batch_size``."""
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    order = np.argsort(-lengths, kind="stable")
    begin = 0
    while begin < len(order):
        width = int(lengths[order[begin]])
        size = max(1, min(batch_size, max_batch_tokens // max(width, 1)))
        rows = order[begin:begin + size]
        begin += size
        feed = {"input_ids": np.full((len(rows), width), pad_id, dtype=np.int64),
                "attention_mask": np.zeros((len(rows), width), dtype=np.int64),
                "token_type_ids": np.zeros((len(rows), width), dtype=np.int64)}
        for r, i in enumerate(rows):
            e = encodings[i]
            feed["input_ids"][r, :len(e.ids)] = e.ids
            feed["attention_mask"][r, :len(e.ids)] = 1
            feed["token_type_ids"][r, :len(e.ids)] = e.type_ids
        yield rows, feed


class OnnxEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or any BERT-style sentence-transformers model) exported to ONNX, run by ONNX Runtime (fp32
    or int8) or by OpenVINO (``runtime="openvino"``: the fp32 file, in ``dtype`` fp32 or bf16).

    Texts are tokenized all at once, sorted by token count and batched, so each batch pads only to its
    own longest text (the big win on CPU); vectors come back in the caller's order.
    """

    def __init__(self, model: str = "", *, quantized: bool = False, device: str = "cpu", batch_size: int = 64,
                 cache_dir: Path | str | None = None, threads: int | None = None,
                 max_batch_tokens: int = MAX_BATCH_TOKENS, runtime: str = "onnxruntime", dtype: str = "fp32") -> None:
        from tokenizers import Tokenizer

        if batch_size < 1:
            raise EmbeddingError(f"batch_size must be >= 1, got {batch_size}")
        if cache_dir is None:
            cache_dir = Settings.from_env().cache_dir
        layout = ModelLayout(local_model_dir(model))
        self.model_path = str(layout.model_dir)
        self.onnx_path = export_model(layout, Path(cache_dir), quantized)
        self.dimension = layout.dimension
        self.max_tokens = layout.max_tokens
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.pooling = layout.pooling
        if runtime not in RUNTIMES:
            raise EmbeddingError(f"unknown ONNX runtime {runtime!r}; use {', '.join(RUNTIMES)}")
        if runtime == "openvino" and quantized:
            raise EmbeddingError("the openvino backend runs the fp32 export (in bf16 where the CPU has AMX), "
                                 "not the int8 one")
        if runtime == "openvino" and device.startswith("cuda"):
            raise EmbeddingError("the openvino backend runs on the CPU; use the torch backend on a GPU")
        self.runtime, self.dtype = runtime, dtype
        if runtime == "openvino":
            self.backend, recipe = "openvino", f"{EXPORT_RECIPE}+{dtype}"
        else:
            self.backend = "onnx-int8" if quantized else "onnx"
            recipe = f"{EXPORT_RECIPE}+{QUANT_RECIPE}" if quantized else EXPORT_RECIPE
        self.model_id = f"{model or DEFAULT_MODEL_NAME}|{self.backend}|{self.dimension}|{recipe}"

        self._tokenizer = Tokenizer.from_file(str(layout.tokenizer_path))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.no_padding()  # padding is done per length-sorted batch below
        self._pad_id = self._pad_token_id(layout)

        self._cuda = device.startswith("cuda")
        threads = threads or usable_cpus()
        self._session = self._open(threads)
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._single: OnnxEmbedder | None = self if threads == 1 or self._cuda else None

    def _pad_token_id(self, layout: ModelLayout) -> int:
        pad = _read_json(layout.model_dir / "special_tokens_map.json").get("pad_token", "[PAD]")
        pad = pad.get("content", "[PAD]") if isinstance(pad, dict) else pad
        token_id = self._tokenizer.token_to_id(pad)
        return 0 if token_id is None else token_id

    def single_threaded(self) -> OnnxEmbedder:
        """This embedder on a session of its own with one intra-op thread, made on the first call and kept.
        Bit-identical vectors (the thread count splits the work, not the sums), and on cores the extraction's
        processes keep busy the short names of the synonym pass embed for ~10% less CPU than on two threads
        (docs/experiments/2026-11-26-synonym-pass-speed.md). On a GPU: itself."""
        if self._single is None:
            single = copy.copy(self)
            single._session = self._open(1)
            single._single = single
            self._single = single
        return self._single

    def _open(self, threads: int) -> Any:
        if self.runtime == "openvino":
            from ragloom.embedding.openvino import open_openvino  # deferred: openvino loads only for its backend

            return open_openvino(Path(self.onnx_path), threads, self.dtype)
        return open_session(self.onnx_path, threads, cuda=self._cuda)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
        except Exception as e:  # tokenizers raises TypeError/bare Exception on non-str input
            raise EmbeddingError(f"could not tokenize the batch: {e}") from e
        for rows, feed in padded_batches(encodings, self._pad_id, self.batch_size, self.max_batch_tokens):
            try:
                hidden = self._session.run(None, {k: feed[k] for k in self._inputs})[0]
            except Exception as e:  # onnxruntime raises bare exceptions, openvino RuntimeErrors of its own
                raise EmbeddingError(f"{self.runtime} failed on a batch of {len(rows)}: {e}") from e
            out[rows] = self._pool(hidden, feed["attention_mask"])
        return out

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
