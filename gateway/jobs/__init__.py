"""Asynchronous OCR jobs: submission and lifecycle (:mod:`gateway.jobs.manager`), the queue and its
leases, the worker that runs jobs from their checkpoints, stored results, webhooks and ``source=``
documents.
"""
