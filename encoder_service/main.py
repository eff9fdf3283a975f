"""``inkstream serve encoder --model DIR [--port P] [--config FILE] [--metrics-port P]``.

Exit codes: 0 after a clean drain (SIGTERM / SIGINT), 2 for a bad command line, configuration or
model directory (message on stderr), 1 for an unexpected failure while serving.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from encoder_service.config import ENV_PREFIX, EncoderConfig, load_encoder_config
from encoder_service.server import build_server
from inkstream.config import ConfigError
from inkstream.errors import InkstreamError
from inkstream.fatal import EXIT_UNRECOVERABLE
from inkstream.service_main import run_service
from models.registry import family_of

log = logging.getLogger("inkstream.encoder")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inkstream serve encoder",
        description="Serve a model family's vision encoder over gRPC (inkstream.encoder.v1.VisionEncoder). "
        f"Settings: YAML --config, then {ENV_PREFIX}__<FIELD> env vars, then these flags.",
    )
    p.add_argument("--model", metavar="DIR", help="checkpoint directory (Hugging Face layout)")
    p.add_argument("--config", metavar="FILE", help="YAML file with EncoderConfig fields")
    p.add_argument("--host", help="bind address (default 127.0.0.1; 0.0.0.0 in containers)")
    p.add_argument("--port", type=int, help="gRPC port (0 = any free port; default 50051)")
    p.add_argument("--metrics-port", type=int, help="Prometheus /metrics port (default: off)")
    p.add_argument("--device", help="torch device, e.g. cpu or cuda")
    p.add_argument("--dtype", help="weights dtype: float32, bfloat16 or float16")
    return p


def _check_model_dir(cfg: EncoderConfig) -> str | None:
    """Return an error message when the model directory is missing or not a known family."""
    if not cfg.model_dir:
        return "no model directory: pass --model DIR (or set model_dir in the config file)"
    try:
        family_of(cfg.model_dir)
    except InkstreamError as exc:
        return exc.message
    except ValueError as exc:  # malformed config.json
        return f"{cfg.model_dir}: cannot read config.json ({exc})"
    return None


async def _serve(cfg: EncoderConfig) -> int:
    srv = await build_server(cfg)
    await srv.start()
    srv.lifecycle.install_signal_handlers(srv.server, cfg.drain_grace_s)
    print(f"inkstream encoder: listening on {cfg.host}:{srv.port} (loading {cfg.model_dir})", flush=True)
    stopped = asyncio.ensure_future(srv.lifecycle.stopped.wait())
    ready = srv.ready_task
    assert ready is not None
    done, _ = await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if ready in done and ready.exception() is not None:
        exc = ready.exception()
        msg = exc.message if isinstance(exc, InkstreamError) else f"{type(exc).__name__}: {exc}"
        print(f"inkstream encoder: could not load the model from {cfg.model_dir}: {msg}", file=sys.stderr)
        await srv.stop()
        return 2
    if ready in done:
        print(f"inkstream encoder: serving {srv.half.model_id if srv.half else ''} on port {srv.port}", flush=True)
        await stopped
    await srv.batcher.stop()
    if srv.lifecycle.failed is not None:
        print(f"inkstream encoder: stopped: {srv.lifecycle.failed}", file=sys.stderr)
        return EXIT_UNRECOVERABLE
    return 0


def main(argv: list[str]) -> int:
    """Entry point of ``inkstream serve encoder``; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, message already printed)
        return int(exc.code or 0)
    overrides = {
        "model_dir": args.model, "host": args.host, "port": args.port, "metrics_port": args.metrics_port,
        "device": args.device, "dtype": args.dtype,
    }
    try:
        cfg = load_encoder_config(args.config, overrides=overrides)
    except ConfigError as exc:
        print(f"inkstream serve encoder: {exc}", file=sys.stderr)
        return 2
    problem = _check_model_dir(cfg)
    if problem:
        print(f"inkstream serve encoder: {problem}", file=sys.stderr)
        return 2
    return run_service("encoder", lambda: _serve(cfg))
