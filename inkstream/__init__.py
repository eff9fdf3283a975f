"""inkstream: serving for optical-compression OCR models (vision encoder -> vision tokens -> MoE decoder).

The ``inkstream`` package is the small common package shared by the three services: wire
conversions, the error map, configuration, telemetry and the command line. Generated protobuf stubs
live under ``inkstream.{common,encoder,decoder,gateway}.v1`` and are produced from ``protos/`` at
build time (see :mod:`inkstream._protogen`); import them through :mod:`inkstream.pb`.
"""

__version__ = "0.1.0"
