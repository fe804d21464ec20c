"""Small random transformer models built on the spot and saved like hub models: real loading code in tests."""

from __future__ import annotations

from pathlib import Path

WORDS = "cell cells protein gene tumour cancer binding growth receptor expression blood heart brain study".split()


def build_encoder(folder: Path, dtype: str = "fp32", seed: int = 3) -> Path:
    """A 2-layer, 32-wide random BERT saved with its weights in ``dtype`` (fp32 | fp16 | bf16), with a WordPiece
    tokenizer.json."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    model = BertModel(config).eval()
    model.to(getattr(torch, {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[dtype]))
    model.save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), model_max_length=128).save_pretrained(folder)
    return folder
