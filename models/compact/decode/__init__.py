"""Decode stage of the ``compact`` family: multi-head latent attention, the pointer-generator copy
head, and the finishing of a decoded segment (:mod:`models.compact.decode.finish`: overrun trim,
unread repeats, spacing head; the one function every path calls).
"""
