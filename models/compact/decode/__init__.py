"""Decode stage of the ``compact`` family: multi-head latent attention, the pointer-generator copy
head, and the finishing of a decoded segment (overrun trim, unread repeats, spacing).
"""
