"""Training of the compact OCR model on synthetic lines: corpus, rendering, data, the training loop."""
