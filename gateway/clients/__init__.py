"""The gateway's gRPC clients of the encoder and decoder: the one place where protos meet plain types.

The pipeline (:mod:`gateway.routing.pipeline`) never touches generated stubs; it calls
:func:`gateway.clients.encoder.encode_page`, :func:`gateway.clients.decoder.decode_segments` and the
Info fetchers with a ``grpc.aio`` channel and gets plain objects back, or a
:class:`gateway.clients.calls.CallFailure` that says how the failure may be retried.

- :mod:`gateway.clients.calls`: outgoing metadata and failure classification, shared by both.
- :mod:`gateway.clients.encoder`: ``VisionEncoder`` Info and Encode (one stream per page).
- :mod:`gateway.clients.decoder`: ``TextDecoder`` Info and Decode (one stream per page's segments).
"""
