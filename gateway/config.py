"""Gateway settings (pydantic), loaded with :func:`inkstream.config.load_config`.

Sources, lowest to highest: defaults below, a YAML file (``--config``), environment variables
``INKSTREAM_GATEWAY__<FIELD>[__<SUBFIELD>]`` (e.g. ``INKSTREAM_GATEWAY__LIMITS__MAX_PAGES=200``),
then command-line flags. Sizes are bytes, times seconds, pixel counts pixels.

Default limits, and why:

* ``max_upload_bytes`` 100 MiB: a 500-page scanned PDF at ~200 KB/page fits.
* ``max_pages`` 1,000 per document.
* ``max_page_pixels`` 50 M pixels (e.g. 7,000 x 7,000): an A4 page scanned at 600 dpi is
  4,960 x 7,016 = 34.8 M. Pillow's own decompression-bomb threshold is 89.5 M (``MAX_IMAGE_PIXELS``);
  a decoded 50 M-pixel RGB image is 150 MB, the most one page may cost while it is normalised.
* ``min_page_side_px`` 8: smaller images carry nothing readable (422 "image too small").

The ``pipeline:`` section (pages in flight, per-request window, encode / decode timeouts, retries)
is :class:`gateway.routing.config.PipelineConfig`, validated with the rest
(``INKSTREAM_GATEWAY__PIPELINE__MAX_PAGES_IN_FLIGHT=32``).
"""

from __future__ import annotations

import pathlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.routing.config import PipelineConfig
from inkstream.config import load_config
from inkstream.page_image import MAX_PAGE_PIXELS
from inkstream.tls import TlsConfig, channel_credentials


class Limits(BaseModel):
    """Input limits enforced by ingest, before decoding where possible."""

    model_config = ConfigDict(extra="forbid")  # a misspelt setting is an error, not ignored

    max_upload_bytes: int = Field(100 * 1024 * 1024, gt=0, description="largest document, bytes")
    max_pages: int = Field(1000, gt=0, description="most pages per document (after page selection too)")
    max_page_pixels: int = Field(MAX_PAGE_PIXELS, gt=0, description="most pixels of one page image (width x height)")
    min_page_side_px: int = Field(8, ge=1, description="smallest accepted image side, pixels")
    max_form_field_bytes: int = Field(16 * 1024, gt=0, description="largest non-file multipart field, bytes")
    upload_chunk_bytes: int = Field(1024 * 1024, gt=0, description="gRPC chunk limit, bytes (proto says 1 MiB)")
    upload_timeout_s: float = Field(300.0, gt=0, description="longest time to receive one upload, seconds")
    header_timeout_s: float = Field(10.0, gt=0, description="longest time to receive a request's line and "
                                    "headers, seconds (slow clients: the connection is closed after a 408)")


class Stores(BaseModel):
    """Where jobs, results and the cache live (README "Jobs, storage and scale-out").

    ``job_store`` "sqlite" (embedded, default: jobs run in the process that accepted them, so each
    gateway process needs its own ``data_dir``) or "redis" (queue, records, idempotency keys and the
    result cache in Redis at ``redis_url``: any gateway answers for any job and a worker takes over
    a dead one's job after ``job_lease_s``). ``result_store`` "dir" (a local directory, default) or
    "s3" (documents and results under ``s3_url``; endpoint and credentials from the standard AWS
    variables). Empty ``data_dir`` = a per-process temp dir (removed at exit).
    """

    model_config = ConfigDict(extra="forbid")

    job_store: Literal["sqlite", "redis"] = "sqlite"
    result_store: Literal["dir", "s3"] = "dir"
    redis_url: str = Field("", description="redis://HOST:PORT/DB (job_store=redis)")
    s3_url: str = Field("", description="s3://BUCKET/PREFIX (result_store=s3)")
    s3_presign_endpoint_url: str = Field("", description="endpoint written into presigned URLs (the address "
                                         "clients reach); empty = AWS_ENDPOINT_URL")
    source_buckets: list[str] = Field(default_factory=list, description="buckets besides s3_url's that "
                                      "source=s3:// may read; no other bucket is ever read")
    presign_expires_s: int = Field(3600, gt=0, le=7 * 24 * 3600, description="life of presigned URLs, seconds")
    data_dir: str = ""
    temp_dir: str = Field("", description="parent of request-scoped temp dirs; empty = system default")
    cache_enabled: bool = True
    cache_ttl_s: float = Field(24 * 3600.0, gt=0)
    cache_max_entries: int = Field(10_000, gt=0, description="directory cache only (Redis: its maxmemory policy)")
    job_ttl_s: float = Field(24 * 3600.0, gt=0, description="finished jobs and results are kept this long")
    job_lease_s: float = Field(30.0, gt=0, description="a running job's lease: renewed every third of it; "
                               "another worker takes the job over when it lapses")
    job_deadline_s: float = Field(3600.0, gt=0, description="a job that cannot finish (storage or replicas "
                                  "down) within this many seconds of its first run fails")
    job_max_attempts: int = Field(5, gt=0, description="runs of one job (takeovers included) before it fails")
    max_jobs_running: int = Field(4, gt=0, description="jobs processed concurrently; others wait queued")
    max_jobs_queued: int = Field(1000, gt=0, description="queued jobs before 429")

    @model_validator(mode="after")
    def _engines_named(self) -> Stores:
        if self.job_store == "redis" and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("job_store=redis needs redis_url=redis://HOST:PORT/DB")
        if self.result_store == "s3" and not self.s3_url.startswith("s3://"):
            raise ValueError("result_store=s3 needs s3_url=s3://BUCKET/PREFIX")
        if self.result_store == "s3" and self.job_store != "redis":
            raise ValueError("result_store=s3 is shared storage: use it with job_store=redis")
        return self


class GatewayConfig(BaseModel):
    """All gateway settings; see the module docstring for sources and units."""

    model_config = ConfigDict(extra="forbid")  # a misspelt setting is an error, not ignored

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535, description="REST port (0 = any free port)")
    grpc_port: int = Field(50050, ge=0, le=65535,
                           description="gRPC port (0 = any free port; default 50050, next to the encoder's 50051 "
                           "and the decoder's 50052 defaults on one host)")
    grpc_enabled: bool = True
    role: Literal["all", "api", "worker"] = Field(
        "all", description="all: accept and run jobs; api: accept and answer, never run jobs; worker: run queued "
        "jobs only (REST has only health, readiness and metrics; no gRPC). api / worker need job_store=redis")
    encoders: list[str] = Field(default_factory=list, description="encoder replica addresses host:port")
    decoders: list[str] = Field(default_factory=list, description="decoder replica addresses host:port")
    limits: Limits = Field(default_factory=Limits)
    stores: Stores = Field(default_factory=Stores)
    render_lookahead_pages: int = Field(2, ge=0, description="pages rendered ahead of the pipeline")
    render_timeout_s: float = Field(120.0, gt=0, description="one page's rasterisation, seconds")
    request_timeout_s: float = Field(600.0, gt=0, description="whole-document deadline of a synchronous request")
    drain_grace_s: float = Field(30.0, ge=0, description="SIGTERM: wait this long for in-flight requests")
    max_connections: int = Field(1000, gt=0, description="open HTTP connections before uvicorn answers 503")
    max_message_bytes: int = Field(64 * 1024 * 1024, gt=0, description="gRPC message limit, bytes")
    replica_tls: TlsConfig = Field(
        default_factory=TlsConfig,
        description="TLS of the gateway's calls to encoders and decoders (client side: ca_file verifies the "
        "services' certificates, cert_file + key_file present a client certificate for mutual TLS); off by default")
    pipeline: PipelineConfig = Field(
        default_factory=PipelineConfig,
        description="data-path settings: max_pages_in_flight (gateway-wide page bound, 429 beyond it), "
        "max_pages_per_request, encode_timeout_s, decode_timeout_s, decode_window_segments, retry ...")

    @model_validator(mode="after")
    def _role_needs_queue(self) -> GatewayConfig:
        if self.role != "all" and self.stores.job_store != "redis":
            raise ValueError(f"role={self.role} needs a shared queue: set stores.job_store=redis")
        return self

    @field_validator("replica_tls")
    @classmethod
    def _readable_tls_files(cls, value: TlsConfig) -> TlsConfig:
        if value.enabled:
            channel_credentials(value)  # ValueError naming a missing / empty PEM file, at start-up
        return value


def load_gateway_config(path: str | pathlib.Path | None = None, overrides: dict[str, Any] | None = None,
                        environ: dict[str, str] | None = None) -> GatewayConfig:
    """GatewayConfig from YAML ``path`` + ``INKSTREAM_GATEWAY__*`` env + ``overrides`` (dotted keys).

    Raises :class:`inkstream.config.ConfigError` naming every bad field.
    """
    return load_config(GatewayConfig, path, env_prefix="INKSTREAM_GATEWAY", overrides=overrides, environ=environ)
