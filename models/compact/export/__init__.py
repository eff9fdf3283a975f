"""Exports of the ``compact`` family: ONNX files of the vision towers written beside the weights
(run by :mod:`models.compact.line` without torch) and the checkpoint writer used by training.
"""
