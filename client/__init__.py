"""Clients of a running gateway: the gRPC client, the ``inkstream ocr`` command and its result types."""
