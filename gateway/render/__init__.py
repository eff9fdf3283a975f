"""Output formats built from page results beyond markdown / text / JSON (:mod:`gateway.stitch`).

:mod:`gateway.render.lines` turns a page's blocks into lines and words with boxes, the common input
of :mod:`gateway.render.hocr` (hOCR, text) and :mod:`gateway.render.searchable_pdf` (the source
document with an invisible text layer, binary).
"""
