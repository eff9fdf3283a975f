"""What a document's page results become: stitching page outcomes into blocks, lines and tables
(:mod:`gateway.output.stitch`), their confidence and warnings (:mod:`gateway.output.signal`), and the
output formats: markdown / text / JSON (stitch), hOCR (:mod:`gateway.output.hocr`) and the searchable
PDF (:mod:`gateway.output.searchable_pdf`), both built on the lines and words with boxes of
:mod:`gateway.output.lines`.
"""
