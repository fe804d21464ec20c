#!/usr/bin/env bash
# Debian's Tesseract for the OCR tests (pytesseract calls the `tesseract` program; English data comes with it).
set -euo pipefail
if command -v tesseract >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[ragloom] installing Debian's tesseract-ocr for the OCR tests" >&2
  (apt-get install -y -q tesseract-ocr >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q tesseract-ocr >/dev/null; }) \
    || echo "[ragloom] could not install tesseract-ocr: the OCR tests will fail with that reason" >&2
else
  echo "[ragloom] tesseract missing and not root: install tesseract-ocr for the OCR tests" >&2
fi
