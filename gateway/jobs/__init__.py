"""Asynchronous OCR jobs: submission and lifecycle (:mod:`gateway.jobs.manager`), the queue and its
leases, the worker that consumes it (:mod:`gateway.jobs.worker`) and one attempt at a job from its
checkpoints (:mod:`gateway.jobs.run`), stored results, webhooks and ``source=``
documents.
"""
