"""Fit the page-level term for text no segment holds: ``unread_ink`` -> expected missed characters.

The line calibration (:mod:`training.compact.fit_confidence`) cannot see text the detector never
found. :func:`models.compact.page.unread_ink.unread_ink` measures it on the page: unread / read
text-like ink, about the characters missed per character read. The gateway turns it into the share
of the page's characters missed, ``s = m / (1 + m)`` with ``m = slope * max(0, unread_ink - floor)``
(:func:`gateway.output.signal.missed_share`), and the page's expected CER into
``(1 - s) * lines' expected CER + s``. ``floor`` absorbs what the measure sees on pages read whole
(a stray mark of text size, the tail of a clipped word); ``slope`` how ink maps to characters
(glyphs of the missed fields against the page's). Both are fitted here on the fit documents'
pages by least squares on the page CER (:func:`fit_unread`), on a grid (two numbers, one optimum:
no solver needed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: the grids searched: ``floor`` (unread / read ink) and ``slope`` (missed characters per unit of it)
FLOORS = tuple(round(0.0025 * k, 4) for k in range(21))
SLOPES = tuple(round(0.05 * k, 2) for k in range(1, 41))


def measure(image, boxes: Sequence[Sequence[float]]) -> float:
    """``unread_ink`` of a page ``image`` (PIL) read in segments of ``boxes`` (x0, y0, x1, y1, page
    pixels): :func:`models.compact.page.unread_ink.unread_ink` on its gray levels, as the encoder
    measures it (there on the upright page, with the boxes of every detected line).
    """
    from models.compact.page.unread_ink import unread_ink

    return unread_ink(np.asarray(image.convert("L")), [(b[0], b[1], b[2], b[3]) for b in boxes])


def document_unread_ink(doc: dict) -> float:
    """``unread_ink`` of a cached fit or bench document (``doc["unread_ink"]`` when it was measured,
    else measured now on the page drawn again, :func:`training.compact.scan_docs.make_document`, from
    ``doc["seed"]`` / ``doc["clean"]``, and kept in ``doc``).
    """
    if "unread_ink" not in doc:
        from training.compact.scan_docs import make_document

        page = make_document(int(doc["seed"]), degrade=not doc.get("clean", False)).image
        doc["unread_ink"] = measure(page, [ln["box"] for ln in doc["lines"]])
    return float(doc["unread_ink"])


def missed(unread: float, slope: float, floor: float) -> float:
    """Share of the page's characters missed (:func:`gateway.output.signal.missed_share`'s rule)."""
    m = slope * max(0.0, unread - floor)
    return m / (1.0 + m)


#: Fewest fit pages with any unread ink for the term to be fitted at all: on fewer, the slope is not
#: determined by the data (every candidate predicts the same) and :func:`fit_unread` says so.
MIN_SIGNAL_PAGES = 3


def fit_unread(pages: Sequence[tuple[float, float, float]],
               loss: Callable[[np.ndarray, np.ndarray], float] | None = None) -> dict[str, float] | None:
    """``{"slope", "floor"}`` minimising the squared error of the page CER over ``pages`` =
    (lines' expected CER, unread_ink, order-free CER, missed pieces included) triples; None when fewer
    than :data:`MIN_SIGNAL_PAGES` of them have any unread ink (the detector found their text: nothing
    to fit, the caller keeps the term it has). Raises ValueError without pages.
    """
    if not pages:
        raise ValueError("no pages to fit the unread-ink term on")
    if sum(1 for p in pages if p[1] > 0.0) < MIN_SIGNAL_PAGES:
        return None
    e = np.array([p[0] for p in pages])
    u = np.array([p[1] for p in pages])
    cer = np.array([p[2] for p in pages])
    best = (float("inf"), 0.0, 0.0)
    for floor in FLOORS:
        excess = np.maximum(0.0, u - floor)
        for slope in SLOPES:
            m = slope * excess
            s = m / (1.0 + m)
            pred = (1.0 - s) * e + s
            err = loss(pred, cer) if loss else float(np.sum((pred - cer) ** 2))
            if err < best[0]:
                best = (err, slope, floor)
    return {"slope": best[1], "floor": best[2]}
