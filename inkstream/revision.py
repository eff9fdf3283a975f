"""Comparing weights revisions (``InfoResponse.revision``, ``EncodeResponse.revision``).

A revision is a content fingerprint of a checkpoint directory, computed by its family's
``checkpoint_identity``. When a family changes HOW it fingerprints, it prefixes the new ones with
a scheme tag (``"<scheme>-<hex>"``): replicas of the old and the new code then report different
strings for the very same weights, and those must not be taken for different weights (a code-only
rollout would otherwise refuse every page). Revisions are therefore compared only within one scheme.
"""

from __future__ import annotations


def scheme(revision: str) -> str:
    """The fingerprint scheme tag of ``revision`` ("" for untagged, e.g. ``"fp2"`` for ``"fp2-1a2b..."``)."""
    return revision.split("-", 1)[0] if "-" in revision else ""


def known_different(a: str, b: str) -> bool:
    """True only when ``a`` and ``b`` are both known, of one scheme, and differ: the weights are
    surely not the same. Empty or differently-tagged revisions cannot tell, so they pass.
    """
    return bool(a) and bool(b) and scheme(a) == scheme(b) and a != b
