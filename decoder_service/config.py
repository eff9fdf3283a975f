"""Decoder service settings (pydantic), loaded with ``inkstream.config.load_config``.

Sources, lowest to highest precedence: defaults here, a YAML file (``--config``), environment variables
``INKSTREAM_DECODER__<FIELD>`` (e.g. ``INKSTREAM_DECODER__MAX_RUNNING=32``), command-line flags.
"""

from __future__ import annotations

import pathlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from inkstream.config import load_config
from inkstream.lifecycle import DEFAULT_MAX_MESSAGE_BYTES
from inkstream.tls import TlsConfig

ENV_PREFIX = "INKSTREAM_DECODER"


class VllmSettings(BaseModel):
    """Settings of the ``vllm`` engine (:mod:`decoder_service.vllm_engine`). Units: tokens, fractions."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str = Field("", description="the language model exported by `inkstream export-vllm` "
                                           "(DeepseekV2ForCausalLM + tokenizer); '' = <model_dir>/vllm")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of GPU memory vLLM may take")
    max_model_len: int = Field(0, ge=0, description="context length vLLM plans for; 0 = the model's own")
    enforce_eager: bool = Field(False, description="no CUDA graphs / torch.compile (faster start, slower steps)")
    kv_cache_space_gib: int = Field(0, ge=0, description="CPU backend only: KV-cache GiB (VLLM_CPU_KVCACHE_SPACE); "
                                                         "0 = vLLM's default")
    max_logprobs: int = Field(1, ge=0, description="top logprobs per token a request may ask vLLM for")


class DecoderConfig(BaseModel):
    """Settings of one decoder replica. Units: tokens, seconds, bytes."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str = Field("", description="checkpoint directory (Hugging Face layout); --model overrides")
    host: str = Field("127.0.0.1", description="gRPC bind address")
    port: int = Field(50052, ge=0, le=65535, description="gRPC port; 0 = pick a free one")
    metrics_port: int | None = Field(None, ge=0, le=65535,
                                     description="Prometheus /metrics port; None = off, 0 = free port")
    engine: Literal["builtin", "vllm"] = Field(
        "builtin", description="decode engine: builtin (own continuous batching, any torch device) or vllm "
        "(vLLM AsyncLLM in this process over the exported language model; GPU replicas)")
    vllm: VllmSettings = Field(default_factory=VllmSettings, description="settings of the vllm engine")
    device: str = Field("cpu", description="torch device, e.g. cpu, cuda, cuda:1")
    dtype: str = Field("float32", pattern="^(float32|float16|bfloat16)$", description="weight / activation dtype")
    max_running: int = Field(64, ge=1, description="sequences in the running batch at most (a line-level model "
                                                   "such as compact runs one per text line)")
    max_waiting: int = Field(64, ge=0, description="queued sequences before RESOURCE_EXHAUSTED")
    max_consecutive_failures: int = Field(
        8, ge=1, description="decode steps failing in a row (none advancing) before the replica reports NOT_SERVING "
        "and exits (inkstream.fatal): a device that is gone fails every step")
    kv_cache_budget_tokens: int = Field(131072, ge=1,
                                        description="KV-cache admission budget over running sequences, tokens")
    max_new_tokens: int = Field(4096, ge=1, description="default max_new_tokens when a request says 0, tokens")
    max_new_tokens_cap: int = Field(8192, ge=1, description="largest max_new_tokens a request may ask for, tokens")
    repetition_ngram: int = Field(20, ge=1, description="n of the n-gram loop detector, tokens")
    repetition_window: int = Field(256, ge=2, description="generated tokens the loop detector inspects")
    repetition_repeats: int = Field(3, ge=2, description="occurrences of one n-gram in the window that count as a loop")
    drain_grace_s: float = Field(60.0, ge=0, description="seconds in-flight sequences may finish after SIGTERM")
    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=4 * 1024 * 1024,
                                   description="gRPC message limit, bytes")
    tls: TlsConfig = Field(default_factory=TlsConfig, description="TLS / mTLS of the gRPC port (off by default)")

    @model_validator(mode="after")
    def _check(self) -> DecoderConfig:
        if self.max_new_tokens > self.max_new_tokens_cap:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens}) must not exceed "
                             f"max_new_tokens_cap ({self.max_new_tokens_cap})")
        if self.repetition_window < self.repetition_ngram * self.repetition_repeats:
            raise ValueError("repetition_window must be >= repetition_ngram * repetition_repeats")
        return self


def load_decoder_config(path: str | pathlib.Path | None = None, **overrides: object) -> DecoderConfig:
    """YAML at ``path`` + ``INKSTREAM_DECODER__*`` env vars + ``overrides``; raises ConfigError."""
    return load_config(DecoderConfig, path, env_prefix=ENV_PREFIX, overrides=overrides)
