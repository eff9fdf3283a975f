"""The gateway's front ends: REST (FastAPI), gRPC and the OpenAI-compatible routes, and API-key access.

Handlers only convert requests and answers and call the plain classes below them
(:class:`gateway.service.OcrService`, :class:`gateway.session.OcrSession`,
:class:`gateway.jobs.manager.JobManager`); errors come from the one error map, :mod:`inkstream.errors`.
"""
