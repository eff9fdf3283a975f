"""``inkstream serve decoder --model DIR [--port P] [--config FILE] [--metrics-port P]``.

Loads the decoder half of the checkpoint's family (``models.registry``), serves ``TextDecoder`` +
health until SIGTERM / SIGINT, then drains. Exit codes: 0 after a clean drain, 2 for a bad model
directory or configuration (message on stderr), 1 for a failure while loading or serving.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys

from decoder_service.config import DecoderConfig, load_decoder_config
from inkstream.config import ConfigError
from inkstream.errors import InkstreamError
from inkstream.fatal import EXIT_UNRECOVERABLE
from inkstream.service_main import run_service
from models.registry import decoder_half_class, family_of

log = logging.getLogger("inkstream.decoder")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inkstream serve decoder",
                                description="Serve a model family's text decoder over gRPC.")
    p.add_argument("--model", help="checkpoint directory (Hugging Face layout with config.json)")
    p.add_argument("--config", help="YAML settings file (see decoder_service/config.py)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="gRPC port (0 = a free port)")
    p.add_argument("--metrics-port", type=int, help="Prometheus /metrics port (0 = a free port)")
    p.add_argument("--device", help="torch device, e.g. cpu or cuda")
    p.add_argument("--dtype", help="float32, float16 or bfloat16")
    return p


def main(argv: list[str]) -> int:
    """Run the decoder service; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    try:
        cfg = load_decoder_config(args.config, model_dir=args.model, host=args.host, port=args.port,
                                  metrics_port=args.metrics_port, device=args.device, dtype=args.dtype)
        if not cfg.model_dir:
            raise InkstreamError("no model directory: pass --model DIR (or model_dir in the config)")
        if not pathlib.Path(cfg.model_dir).is_dir():
            raise InkstreamError(f"model directory {cfg.model_dir} does not exist")
        decoder_half_class(family_of(cfg.model_dir))  # family known and importable
    except (ConfigError, InkstreamError) as exc:
        print(f"inkstream serve decoder: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"inkstream serve decoder: cannot import the model family for {cfg.model_dir}: {exc}",
              file=sys.stderr)
        return 2
    return run_service("decoder", lambda: _serve(cfg))


async def _serve(cfg: DecoderConfig) -> int:
    from decoder_service.server import build_server  # heavy: torch and the model code, after the checks

    engine = None
    if cfg.engine == "vllm":  # vLLM's engine core process starts before the gRPC server's threads
        engine = await _start_vllm(cfg)
    bundle = await build_server(cfg, wait_ready=False, engine=engine)
    bundle.install_signal_handlers()
    print(f"inkstream decoder: listening on {cfg.host}:{bundle.port} (loading {cfg.model_dir})", flush=True)
    log.info("decoder listening (NOT_SERVING until loaded and warmed up)",
             extra={"host": cfg.host, "port": bundle.port, "metrics_port": bundle.metrics_port})
    stopped = asyncio.create_task(bundle.lifecycle.stopped.wait())
    await asyncio.wait({bundle.ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
    failure = bundle.ready.exception() if bundle.ready.done() else None
    if failure is not None:
        await bundle.stop()
        raise failure
    await stopped
    await bundle._stop_engine()
    if bundle.lifecycle.failed is not None:
        print(f"inkstream decoder: stopped: {bundle.lifecycle.failed}", file=sys.stderr)
        return EXIT_UNRECOVERABLE
    return 0


async def _start_vllm(cfg: DecoderConfig):
    """Load the half on CPU (prompt template, tokenizer) and start the vllm engine on ``cfg.device``."""
    from decoder_service.engine import make_engine
    from decoder_service.server import load_half
    from inkstream.lifecycle import in_daemon_thread

    print(f"inkstream decoder: starting the vllm engine (export of {cfg.model_dir})", flush=True)
    half = await in_daemon_thread(load_half, cfg.model_copy(update={"device": "cpu", "dtype": "float32"}))
    engine = make_engine(cfg, half, name=f"decoder:{cfg.port}")
    await engine.start()
    return engine
