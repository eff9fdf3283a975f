"""Page stage of the ``compact`` encoder: text-line detection (PP-OCR DB detector), large print, skew,
page layout (Tesseract's segmentation), reading order and table structure; page preparation for print
the recogniser was not trained on. Produces line boxes in page pixels; imports nothing above
:mod:`models.compact.line`.
"""
