"""Embedders (PyTorch reference, ONNX Runtime fp32/int8) behind one interface; `make_embedder` picks one."""

from ragloom.embedding.base import Embedder
from ragloom.embedding.factory import EmbedderParams, make_embedder

__all__ = ["Embedder", "EmbedderParams", "make_embedder"]
