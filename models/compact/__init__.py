"""The embedded ``compact`` model family: a small line-level optical-compression OCR model.

Encoder half: PP-OCR text-line detection (ONNX, from the rapidocr wheel) -> reading order -> line
crops normalised to 32 px height -> timm ResNet trunk -> convolutional token compressor -> vision
tokens, one segment per text line. Decoder half: a DeepSeek-V2 mixture-of-experts causal LM
(transformers) reading the vision tokens as ``inputs_embeds`` and writing the line's characters.
See ``models/compact/README.md`` (model card) and ``training/compact/train.py`` (training).
"""

from __future__ import annotations

import pathlib

#: The checkpoint ``inkstream up`` / ``inkstream ocr`` / ``inkstream eval`` use when no ``--model`` is
#: given (a directory beside this file; see README.md there): the bilingual one, which reads simplified
#: Chinese and Latin print (English pages through it: same CER within 0.1 point and the same pages/s as
#: the Latin-only ``weights``, which stays for ``--model models/compact/weights``).
DEFAULT_CHECKPOINT = "weights_zh"


def default_checkpoint_dir() -> pathlib.Path:
    """The embedded default checkpoint's directory (:data:`DEFAULT_CHECKPOINT`; may not exist before
    training).
    """
    return pathlib.Path(__file__).resolve().parent / DEFAULT_CHECKPOINT
