"""The int8 export drops onnxruntime's pre-processing advice, and only that, only during the call."""

from __future__ import annotations

import logging

from ragloom.embedding import onnx


def test_quantize_advice_is_dropped_only_during_the_call(caplog) -> None:
    caplog.set_level(logging.WARNING)
    with onnx._without_preprocess_advice():
        logging.warning("Please consider to run pre-processing before quantization. Refer to example: ...")
        logging.warning("something else")
    logging.warning("Please consider to run pre-processing before quantization (outside the call)")
    assert [r.getMessage() for r in caplog.records] == [
        "something else", "Please consider to run pre-processing before quantization (outside the call)"]
