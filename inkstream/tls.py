"""Optional TLS (and mutual TLS) for the internal gRPC hops gateway -> encoder / decoder.

Off by default: inside a cluster the NetworkPolicies in ``k8s/`` already restrict who reaches the
model services. Turn it on when the network between pods is not trusted (or a mesh does not do
mTLS for you): mount a cert-manager / Secret volume with PEM files and point the settings below at it.

* servers: :func:`server_credentials` (``cert_file`` + ``key_file``; with ``client_ca_file`` the
  server requires client certificates signed by that CA = mutual TLS);
* clients: :func:`channel_credentials` (``ca_file`` to verify the server; ``cert_file`` +
  ``key_file`` to present a client certificate).

Both read the files once and raise ``ValueError`` naming the path when a file is missing or empty,
so a wrong mount fails at start-up, not on the first call.
APIs: ``grpc.ssl_server_credentials`` / ``grpc.ssl_channel_credentials`` (grpcio docs).
"""

from __future__ import annotations

import pathlib

import grpc
from pydantic import BaseModel, ConfigDict, Field


class TlsConfig(BaseModel):
    """TLS settings of one side of a gRPC hop (paths to PEM files; empty = not used)."""

    model_config = ConfigDict(extra="forbid")  # "enable: true" must not silently leave TLS off

    enabled: bool = Field(False, description="use TLS on this hop")
    cert_file: str = Field("", description="PEM certificate chain presented by this side")
    key_file: str = Field("", description="PEM private key of cert_file")
    ca_file: str = Field("", description="client: CA bundle that signed the server certificate")
    client_ca_file: str = Field("", description="server: CA of accepted client certificates (mutual TLS)")
    server_name_override: str = Field("", description="client: expected server name when dialing by IP")
    health_port: int = Field(0, ge=0, le=65535, description=(
        "server, with TLS on: also serve grpc.health.v1 (and nothing else) in plaintext on this port, "
        "for Kubernetes gRPC probes, which cannot speak TLS; 0 = off"))


def _read(path: str, what: str) -> bytes:
    p = pathlib.Path(path)
    if not p.is_file():
        raise ValueError(f"TLS {what} file {p} does not exist")
    data = p.read_bytes()
    if not data.strip():
        raise ValueError(f"TLS {what} file {p} is empty")
    return data


def server_credentials(cfg: TlsConfig) -> grpc.ServerCredentials:
    """``grpc.ServerCredentials`` from ``cfg`` (requires ``cert_file`` and ``key_file``; mutual TLS
    when ``client_ca_file`` is set). Raises ValueError for missing settings or files.
    """
    if not cfg.cert_file or not cfg.key_file:
        raise ValueError("TLS server needs cert_file and key_file")
    pair = [(_read(cfg.key_file, "private key"), _read(cfg.cert_file, "certificate"))]
    if cfg.client_ca_file:
        return grpc.ssl_server_credentials(pair, root_certificates=_read(cfg.client_ca_file, "client CA"),
                                           require_client_auth=True)
    return grpc.ssl_server_credentials(pair)


def channel_credentials(cfg: TlsConfig) -> grpc.ChannelCredentials:
    """``grpc.ChannelCredentials`` from ``cfg``: server verified with ``ca_file`` (system roots when
    empty), client certificate presented when ``cert_file``/``key_file`` are set.
    """
    root = _read(cfg.ca_file, "CA") if cfg.ca_file else None
    if bool(cfg.cert_file) != bool(cfg.key_file):
        raise ValueError("TLS client certificate needs both cert_file and key_file")
    key = _read(cfg.key_file, "private key") if cfg.key_file else None
    cert = _read(cfg.cert_file, "certificate") if cfg.cert_file else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert)


def add_port(server: grpc.aio.Server, address: str, cfg: TlsConfig | None) -> int:
    """Bind ``address`` on ``server`` with TLS when ``cfg.enabled``, else insecure; returns the port."""
    if cfg is not None and cfg.enabled:
        return server.add_secure_port(address, server_credentials(cfg))
    return server.add_insecure_port(address)


def open_channel(target: str, cfg: TlsConfig | None, options: list | None = None,
                 interceptors: list | None = None) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target``: secure when ``cfg.enabled`` (with ``server_name_override``
    as ``grpc.ssl_target_name_override`` when set), else insecure.
    """
    opts = list(options or [])
    if cfg is not None and cfg.enabled:
        if cfg.server_name_override:
            opts.append(("grpc.ssl_target_name_override", cfg.server_name_override))
        return grpc.aio.secure_channel(target, channel_credentials(cfg), options=opts, interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options=opts, interceptors=interceptors)
