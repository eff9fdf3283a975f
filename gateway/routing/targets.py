"""Replica addresses: ``host:port`` targets split and joined (IPv6 in brackets), and whether a host is
an IP literal (a name is re-resolved; an IP is not).
"""

from __future__ import annotations

import ipaddress


def split_target(target: str) -> tuple[str, int]:
    """``"host:port"`` / ``"[v6]:port"`` -> (host, port). Raises ValueError for a malformed target."""
    t = target.strip().removeprefix("dns:///").removeprefix("dns:")
    host, sep, port = t.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"replica address {target!r} is not host:port")
    return host.strip("[]"), int(port)


def join_target(host: str, port: int) -> str:
    """(host, port) -> gRPC target string, bracketing IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
