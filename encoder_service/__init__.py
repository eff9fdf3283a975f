"""inkstream vision-encoder service: page images in, vision tokens out (``inkstream.encoder.v1``).

Modules: :mod:`~encoder_service.config` (settings), :mod:`~encoder_service.images` (bytes -> RGB page),
:mod:`~encoder_service.batcher` (admission + dynamic micro-batching; its scheduling loop and forward step:
:mod:`~encoder_service.batch_loop`), :mod:`~encoder_service.metrics`
(OpenTelemetry instruments), :mod:`~encoder_service.convert` (the one proto <-> Python conversion
module), :mod:`~encoder_service.servicer` (grpc.aio handlers), :mod:`~encoder_service.server`
(``build_server`` factory, load / warm-up / drain), :mod:`~encoder_service.main` (``inkstream serve encoder``).
"""
