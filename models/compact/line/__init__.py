"""Line stage of the ``compact`` encoder: line images normalised for the recognisers, long lines split,
the two vision towers (the Latin ResNet line encoder, the bilingual PP tower on PP-OCRv6's trunk),
script routing between them, and the token columns they write for the decoder.
"""
