"""``inkstream serve gateway --encoders ADDR[,ADDR...] --decoders ADDR[,ADDR...] [--port P]
[--grpc-port P] [--host H] [--role all|api|worker] [--config FILE]``: the REST (uvicorn) and gRPC front
ends in one process; ``--role`` splits online (api) and batch (worker) pools over a shared Redis queue.

Settings: YAML ``--config``, then ``INKSTREAM_GATEWAY__<FIELD>`` env vars, then flags (see
:mod:`gateway.config`). API keys: :func:`gateway.apis.auth.load_api_keys` (env ``INKSTREAM_API_KEYS_FILE``
/ ``INKSTREAM_API_KEYS``; open when none is configured).

Shutdown (SIGTERM / SIGINT): readiness turns 503 and gRPC health NOT_SERVING at once, new requests
get UNAVAILABLE, in-flight requests get up to ``drain_grace_s`` seconds, then both servers stop; jobs
still queued or running stay so (embedded stores: queued again at the next start). A second signal stops at once.
Exit codes: 0 after a clean shutdown, 2 for a bad command line or configuration (message on
stderr), 1 for an unexpected failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

import uvicorn

from gateway.config import GatewayConfig, load_gateway_config
from inkstream.config import ConfigError
from inkstream.service_main import run_service

log = logging.getLogger("inkstream.gateway")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inkstream serve gateway",
        description="Serve the OCR gateway: REST (FastAPI) and gRPC (inkstream.gateway.v1.OcrGateway) in front "
        "of encoder and decoder replicas. Settings: YAML --config, then INKSTREAM_GATEWAY__<FIELD> env vars, "
        "then these flags.",
    )
    p.add_argument("--encoders", metavar="ADDR[,ADDR...]", help="encoder replica addresses host:port")
    p.add_argument("--decoders", metavar="ADDR[,ADDR...]", help="decoder replica addresses host:port")
    p.add_argument("--host", help="bind address (default 127.0.0.1; 0.0.0.0 in containers)")
    p.add_argument("--port", type=int, help="REST port (default 8080; 0 = any free port)")
    p.add_argument("--grpc-port", type=int, help="gRPC port (default 50050; 0 = any free port)")
    p.add_argument("--role", choices=("all", "api", "worker"),
                   help="all (default): accept and run jobs; api: accept and answer, never run jobs; worker: run "
                        "queued jobs only (REST has only /healthz, /readyz, /metrics; no gRPC). api and worker need "
                        "stores.job_store=redis")
    p.add_argument("--config", metavar="FILE", help="YAML file with GatewayConfig fields")
    return p


def _addrs(value: str | None) -> list[str] | None:
    return [a.strip() for a in value.split(",") if a.strip()] if value else None


class _Server(uvicorn.Server):
    """uvicorn server whose signal handling is ours (drain first, see the module docstring)."""

    @contextlib.contextmanager
    def capture_signals(self):
        """No-op: SIGTERM / SIGINT are handled by :func:`_serve` (drain first)."""
        yield


async def _serve(cfg: GatewayConfig) -> int:
    # lazy: the server stack (FastAPI, gRPC, the pipeline: about a second) only once the config loaded
    from gateway.apis.auth import load_api_keys
    from gateway.apis.grpc_api import build_grpc_server
    from gateway.apis.header_deadline import header_deadline_protocol
    from gateway.apis.rest import create_app
    from gateway.core import GatewayCore
    from gateway.routing.pipeline import Pipeline

    keys = load_api_keys()
    if keys is None:
        log.warning("no API keys configured: the gateway's APIs are open to anyone who can reach them")
    pipeline = await Pipeline.connect(cfg.encoders, cfg.decoders, cfg.pipeline,
                                      max_message_bytes=cfg.max_message_bytes, tls=cfg.replica_tls)
    core = GatewayCore(cfg, pipeline)
    core.start()
    grpc_server: Any = None
    lifecycle: Any = None
    try:
        app = create_app(cfg, pipeline, core, api_keys=keys)
        if cfg.grpc_enabled and cfg.role != "worker":
            grpc_server, grpc_port, lifecycle = await build_grpc_server(core, cfg.grpc_port, cfg.host, keys)
            print(f"inkstream gateway: gRPC on {cfg.host}:{grpc_port}", flush=True)
        # The drain below already waited for in-flight requests; uvicorn then gets a few seconds for
        # responses still being written (and requests that slipped in) before it closes connections.
        # header_deadline_protocol: slow clients (slowloris) are cut after limits.header_timeout_s
        server = _Server(uvicorn.Config(app, host=cfg.host, port=cfg.port, log_config=None, lifespan="on",
                                        limit_concurrency=cfg.max_connections,
                                        http=header_deadline_protocol(cfg.limits.header_timeout_s),
                                        timeout_graceful_shutdown=int(max(5.0, min(cfg.drain_grace_s, 30.0)))))
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_signal() -> None:
            """First signal: drain; second: stop at once."""
            if stop.is_set():
                server.force_exit = True
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        async def run_uvicorn() -> None:
            """Serve until told to exit; a failed bind ends quietly (uvicorn already logged it)."""
            try:
                await server.serve()
            except SystemExit:  # uvicorn exits when it cannot bind; it logged why
                pass

        serving = asyncio.ensure_future(run_uvicorn())
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if not server.started:
            print(f"inkstream serve gateway: cannot listen on {cfg.host}:{cfg.port}", file=sys.stderr)
            return 2
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"inkstream gateway: REST on http://{cfg.host}:{port} (role {cfg.role}; "
              f"encoders {', '.join(cfg.encoders)}; decoders {', '.join(cfg.decoders)})", flush=True)
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({serving, waiter}, return_when=asyncio.FIRST_COMPLETED)
        log.info("drain started", extra={"inflight": core.inflight, "grace_s": cfg.drain_grace_s})
        if lifecycle is not None:
            await lifecycle.set_not_serving()
        await core.drain(cfg.drain_grace_s)
        server.should_exit = True
        await serving
        return 0
    finally:
        if grpc_server is not None:
            await grpc_server.stop(grace=1.0)
        await core.close()
        await pipeline.close()


def main(argv: list[str]) -> int:
    """Entry point of ``inkstream serve gateway``; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, message already printed)
        return int(exc.code or 0)
    overrides = {"role": args.role, "host": args.host, "port": args.port, "grpc_port": args.grpc_port,
                 "encoders": _addrs(args.encoders), "decoders": _addrs(args.decoders)}
    try:
        cfg = load_gateway_config(args.config, overrides=overrides)
    except ConfigError as exc:
        print(f"inkstream serve gateway: {exc}", file=sys.stderr)
        return 2
    if not cfg.encoders or not cfg.decoders:
        print("inkstream serve gateway: give at least one encoder and one decoder address "
              "(--encoders host:port[,...] --decoders host:port[,...])", file=sys.stderr)
        return 2
    return run_service("gateway", lambda: _serve(cfg))
