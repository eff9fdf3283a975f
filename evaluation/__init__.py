"""``inkstream eval``: CER / WER of documents with ground truth through a running stack, in-process, or
with Tesseract / RapidOCR on the same pages (:mod:`evaluation.run`; scoring in :mod:`evaluation.score`,
the engines in :mod:`evaluation.engines`).
"""
