"""Loopback helpers of the local launcher: free TCP ports, readiness probes (gRPC health, HTTP) and
a Prometheus ``/metrics`` scrape.

Used by :class:`launcher.local_stack.LocalStack` (which imports them, so ``launcher.local_stack``
names them too), ``inkstream up`` and the tests.
"""

from __future__ import annotations

import contextlib
import socket

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it). Another process may take it before
    the child binds; :class:`~launcher.local_stack.LocalStack` then respawns the child on new ports.
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether TCP ``port`` on ``host`` can be bound right now (no other process listens on it)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def grpc_serving(addr: str, timeout_s: float = 1.0) -> bool:
    """True when ``addr`` answers ``grpc.health.v1.Health/Check`` with SERVING."""
    with grpc.insecure_channel(addr) as ch:
        try:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError:
            return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING


def http_up(url: str, timeout_s: float = 1.0) -> bool:
    """True when ``url`` answers HTTP with anything but 503 (a 404 means no such probe: up anyway)."""
    try:
        r = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return r.status_code != 503


def scrape_metrics(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """The samples of a Prometheus text ``/metrics`` page at ``url``: ``{"name{labels}": value}``
    (comments and unparsable values skipped). Raises httpx.HTTPError when it cannot be fetched.
    """
    r = httpx.get(url, timeout=timeout_s)
    r.raise_for_status()
    out: dict[str, float] = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[key] = float(val)
    return out
