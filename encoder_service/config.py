"""Settings of the encoder service (pydantic), loaded with :func:`inkstream.config.load_config`.

Sources, lowest precedence first: field defaults, a YAML file (``--config FILE``), environment
variables ``INKSTREAM_ENCODER__<FIELD>`` (e.g. ``INKSTREAM_ENCODER__MAX_BATCH_SIZE=16``), command-line
flags. Units are in the field names or descriptions (bytes, pixels, milliseconds, seconds).

Defaults, and where they come from:

* ``max_image_pixels`` = 40,000,000: an A4 page rasterised at 600 dpi is 4,960 x 7,016 = 34.8 MP;
  anything larger is treated as a decompression bomb (Pillow's own warning threshold is 89.5 MP,
  ``PIL.Image.MAX_IMAGE_PIXELS``).
* ``max_image_bytes`` = 20 MiB: a lossless PNG of such a page is well under that.
* ``max_message_bytes`` = 64 MiB (:data:`inkstream.lifecycle.DEFAULT_MAX_MESSAGE_BYTES`): above a
  page image and above the largest page's vision tokens (1,120 x 1,280 x 4 B = 5.7 MB in float32).
* ``max_batch_size`` / ``max_wait_ms``: 8 pages / 10 ms (Triton Inference Server's dynamic batcher
  has the same two knobs, ``preferred_batch_size`` and ``max_queue_delay_microseconds``). The window
  is small next to a page's forward pass (tens of ms on a GPU, seconds on a CPU), so a lone page
  loses little while concurrent pages share a forward.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from inkstream.config import load_config
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES
from inkstream.page_image import ENCODER_MAX_IMAGE_PIXELS
from inkstream.tls import TlsConfig

ENV_PREFIX = "INKSTREAM_ENCODER"
DTypeName = Literal["float32", "float16", "bfloat16"]


class EncoderConfig(BaseModel):
    """Encoder service settings. Unknown keys are rejected (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str | None = Field(None, description="checkpoint directory (Hugging Face layout); --model")
    host: str = Field("127.0.0.1", description="gRPC bind address; 0.0.0.0 in containers")
    port: int = Field(50051, ge=0, le=65535, description="gRPC port; 0 = any free port")
    metrics_port: int | None = Field(None, ge=0, le=65535, description="Prometheus /metrics port; None = off")
    device: str = Field("cpu", description="torch device of the vision tower, e.g. cpu, cuda, cuda:1")
    dtype: DTypeName = Field("float32", description="weights / compute dtype (bfloat16 on GPUs)")
    wire_dtype: DTypeName = Field("bfloat16", description="dtype of vision tokens on the wire")
    max_batch_size: int = Field(8, ge=1, le=1024, description="pages per forward pass")
    max_wait_ms: float = Field(10.0, ge=0, le=10_000, description="micro-batching window, milliseconds")
    max_queue_pages: int = Field(64, ge=1, description="admitted pages waiting for a forward before RESOURCE_EXHAUSTED")
    max_consecutive_failures: int = Field(
        8, ge=1, description="forward passes failing in a row (no page encoded) before the replica reports NOT_SERVING "
        "and exits (inkstream.fatal): a device that is gone fails every forward")
    max_image_bytes: int = Field(20 * 1024 * 1024, ge=1024, description="largest page image, bytes")
    max_image_pixels: int = Field(ENCODER_MAX_IMAGE_PIXELS, ge=1,
                                  description="largest page image, width x height pixels")
    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=4 * 1024 * 1024,
                                   description="gRPC message limit, bytes")
    preprocess_threads: int | None = Field(
        None, ge=1, le=64, description="threads decoding + preprocessing pages; None = the half's own number "
        "(EncoderHalf.preprocess_threads: compact 1, its preprocessing holds the GIL; deepseek_ocr2 2)")
    intra_op_threads: int | None = Field(
        None, ge=1, le=64, description="CPU threads of one forward pass (the compact half's detector and towers "
        "on onnxruntime; torch's for deepseek_ocr2); None = the half's default (compact: 1). Size it to the "
        "replica's CPU limit; inkstream up gives its one encoder up to 4 of the machine's cores")
    drain_grace_s: float = Field(30.0, ge=0, description="seconds in-flight pages may take after SIGTERM")
    tls: TlsConfig = Field(default_factory=TlsConfig, description="TLS / mTLS of the gRPC port (off by default)")

    @model_validator(mode="after")
    def _limits_consistent(self) -> EncoderConfig:
        # An EncodeRequest carries the image plus a few bytes of fields; it must fit one message.
        if self.max_image_bytes + 4096 > self.max_message_bytes:
            raise ValueError(
                f"max_image_bytes ({self.max_image_bytes}) must be at least 4096 bytes below "
                f"max_message_bytes ({self.max_message_bytes})"
            )
        return self


def load_encoder_config(
    path: str | pathlib.Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> EncoderConfig:
    """YAML at ``path`` + ``INKSTREAM_ENCODER__*`` env vars + ``overrides`` (None values skipped).

    Raises :class:`inkstream.config.ConfigError` naming every bad field.
    """
    return load_config(EncoderConfig, path, env_prefix=ENV_PREFIX, overrides=overrides, environ=environ)
