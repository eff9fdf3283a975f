"""Gateway configuration: env overrides, validation of every section, the shipped k8s config."""

from __future__ import annotations

import pathlib

import pytest

from gateway.config import load_gateway_config
from inkstream.config import ConfigError

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_env_overrides_and_defaults():
    cfg = load_gateway_config(environ={"INKSTREAM_GATEWAY__LIMITS__MAX_PAGES": "7",
                                       "INKSTREAM_GATEWAY__PIPELINE__MAX_PAGES_IN_FLIGHT": "5",
                                       "INKSTREAM_GATEWAY__GRPC_PORT": "0"})
    assert cfg.limits.max_pages == 7 and cfg.grpc_port == 0
    assert cfg.pipeline.model_dump(exclude_unset=True) == {"max_pages_in_flight": 5}
    assert cfg.limits.max_page_pixels == 50_000_000 and cfg.stores.job_store == "sqlite"


@pytest.mark.parametrize("env,needle", [
    ({"INKSTREAM_GATEWAY__PIPELINE__BOGUS": "1"}, "bogus"),
    ({"INKSTREAM_GATEWAY__STORES__JOB_STORE": "redis"}, "job_store=redis needs redis_url"),
    ({"INKSTREAM_GATEWAY__STORES__JOB_STORE": "kafka"}, "stores.job_store"),
    ({"INKSTREAM_GATEWAY__ROLE": "worker"}, "role=worker needs a shared queue"),
    ({"INKSTREAM_GATEWAY__LIMITS__MAX_UPLOAD_BYTES": "0"}, "limits.max_upload_bytes"),
    ({"INKSTREAM_GATEWAY__PORT": "70000"}, "port"),
    ({"INKSTREAM_GATEWAY__LIMITS__MAX_PAGEZ": "3"}, "limits.max_pagez"),  # misspelt: not ignored
    ({"INKSTREAM_GATEWAY__REPLICA_TLS__ENABLE": "true"}, "replica_tls.enable"),
    ({"INKSTREAM_GATEWAY__PIPELINE__ENCODE_TIMEOUT_S": "fast"}, "encode_timeout_s must be a number"),
    ({"INKSTREAM_GATEWAY__PIPELINE__RETRY": "5"}, "retry must be a mapping"),
    ({"INKSTREAM_GATEWAY__PIPELINE__MAX_PAGES_PER_REQUEST": "2.5"}, "max_pages_per_request must be an integer"),
])
def test_invalid_settings_are_named(env, needle):
    with pytest.raises(ConfigError, match=needle):
        load_gateway_config(environ=env)


def test_shipped_kubernetes_config_loads():
    path = ROOT / "k8s" / "base" / "config" / "gateway.yaml"
    if not path.is_file():
        pytest.skip("no k8s gateway config in this tree")
    cfg = load_gateway_config(path, environ={})
    assert cfg.host == "0.0.0.0" and cfg.encoders and cfg.decoders
