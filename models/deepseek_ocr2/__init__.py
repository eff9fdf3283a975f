"""DeepSeek-OCR-2 model family (``deepseek_ocr2``) on transformers' own ``DeepseekOcr2*`` classes.

Modules: ``encoder_half`` (image processor + vision tower -> vision tokens), ``decoder_half``
(tokenizer + prompt + MoE text model), ``checkpoint`` (per-half safetensors loading), ``tiny``
(tiny random checkpoint writer, ``inkstream make-tiny-checkpoint``), ``reference`` (slow full-model
``generate`` used as ground truth).
"""
