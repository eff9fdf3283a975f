"""gRPC channel arguments of every inkstream hop, in one place: message limits and keepalive.

Keepalive has two sides that must agree (gRPC's keepalive guide, ``doc/keepalive.md`` of grpc/grpc):
a client sends an HTTP/2 PING every ``keepalive_time_ms`` (here also on idle connections,
``permit_without_calls``), and a server that receives pings more often than its
``grpc.http2.min_ping_interval_without_data_ms`` (gRPC's default: 5 minutes) counts a "strike";
after ``grpc.http2.max_ping_strikes`` (default 2) it sends GOAWAY ``ENHANCE_YOUR_CALM
"too_many_pings"`` and the client's connection (and every stream on it) is dropped. So the servers'
minimum interval is derived from the clients' interval here (half of it: pings are timer-driven and
may come early), and both sides take their options from :data:`KEEPALIVE`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Vision tokens of the real model's largest page: 1,120 tokens x 1,280 hidden x 4 bytes (fp32)
# = 5.7 MB; bf16 halves it. gRPC's default 4 MiB receive limit is below that, so services set
# their limit explicitly (default 64 MiB also covers multi-segment pages and page images).
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class KeepalivePolicy:
    """Client ping interval ``time_s`` and ping-ack timeout ``timeout_s`` (seconds); the server
    side accepts pings every ``time_s / 2`` seconds or slower, with or without calls in flight.
    30 s / 10 s: often enough to notice a dead peer (kill -9, node loss) within ~40 s on an idle
    connection and to keep NAT / load-balancer idle timers (commonly 60-350 s) from cutting it.
    """

    time_s: float = 30.0
    timeout_s: float = 10.0

    def client(self) -> list[tuple[str, int]]:
        """Channel arguments of a client (a gateway's channel to a replica, the client library)."""
        return [
            ("grpc.keepalive_time_ms", int(self.time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout_s * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),  # no cap on pings between data frames
        ]

    def server(self) -> list[tuple[str, int]]:
        """Server arguments that accept this policy's client pings (and ping idle clients too)."""
        return [
            ("grpc.keepalive_time_ms", int(self.time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout_s * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", int(self.time_s * 1000 / 2)),
            ("grpc.http2.max_ping_strikes", 2),
        ]


KEEPALIVE = KeepalivePolicy()


def _limits(max_message_bytes: int) -> list[tuple[str, int]]:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes)]


def client_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   keepalive: KeepalivePolicy = KEEPALIVE) -> list[tuple[str, int]]:
    """Arguments of a client channel: message limits (bytes) and the client side of ``keepalive``."""
    return [*_limits(max_message_bytes), *keepalive.client()]


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   keepalive: KeepalivePolicy = KEEPALIVE) -> list[tuple[str, int]]:
    """Arguments of a gRPC server: message limits (bytes) and the server side of ``keepalive``."""
    return [*_limits(max_message_bytes), *keepalive.server()]


def listener_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                     keepalive: KeepalivePolicy = KEEPALIVE) -> list[tuple[str, int]]:
    """:func:`server_options` plus ``grpc.so_reuseport`` 0: gRPC sets SO_REUSEPORT by default on
    Linux, so a second server started on a port already in use would bind it too and silently share
    its connections; without it the bind fails (``add_*_port`` returns 0).
    """
    return [*server_options(max_message_bytes, keepalive), ("grpc.so_reuseport", 0)]
