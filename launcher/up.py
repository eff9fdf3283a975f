"""``inkstream up``: the whole stack on this machine, supervised until Ctrl-C.

Starts a :class:`launcher.local_stack.LocalStack` (encoder and decoder replicas, then the gateway),
prints the gateway's REST and gRPC addresses and every service's metrics URL, restarts an encoder
or decoder that exits (:func:`watch`), and on SIGINT / SIGTERM drains and stops everything.

Ports: ``--port`` (REST, default 8080) and ``--grpc-port`` (default 50050). When a default port is
taken by another process, a free one is picked and printed instead; a port given explicitly that
is taken stops the command with exit code 2 naming the flag.

State: jobs (the gateway's SQLite store ``gateway/jobs.sqlite``), their results (``gateway/results``)
and the processes' logs (``logs/``, appended across runs) live in ``--state-dir``, by default
``inkstream/up`` under the user's data folder (:func:`default_state_dir`: ``$XDG_DATA_HOME`` or
``~/.local/share`` on Linux, via platformdirs), so a job submitted before a restart answers after it
(jobs unfinished at the stop are recovered by the gateway at the next start). ``--fresh`` deletes the
folder first, on purpose. One ``inkstream up`` per state folder at a time (a lock file; a second
one exits with code 2).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pathlib
import shutil
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import IO

import platformdirs

from launcher.local_stack import DRAIN_ENV, DRAIN_GRACE_S, LocalStack, PortTaken, free_port
from launcher.model_dir import check_model_dir
from launcher.probes import port_free

#: ``inkstream up --help``: plain text (the module docstring is reStructuredText, for the API docs)
HELP = """\
Run the whole stack on this machine (encoder and decoder replicas, then the gateway), supervised
until Ctrl-C: it prints the gateway's REST and gRPC addresses and every service's metrics URL,
starts again an encoder or decoder that exits, and on Ctrl-C (SIGINT) or SIGTERM drains requests
in flight and stops everything (Ctrl-C twice: at once)."""
HELP_EPILOG = f"""\
ports:
  --port (REST, default 8080) and --grpc-port (default 50050): when a default port is taken by
  another process, a free one is picked and printed; a port given explicitly that is taken exits 2.

state:
  jobs, their results and the processes' logs are kept in --state-dir across restarts (jobs left
  unfinished at a stop run again at the next start); --fresh deletes that folder first. One
  inkstream up per state folder at a time (a second one exits 2).

drain:
  on a stop the gateway drains requests in flight for up to its drain_grace_s ({DRAIN_GRACE_S:g} s unless
  {DRAIN_ENV} sets another), then the stack stops.
"""
DEFAULT_PORTS = {"--port": 8080, "--grpc-port": 50050}
#: the gateway's job store and result directory (``stores.data_dir``), as an environment override
DATA_DIR_ENV = "INKSTREAM_GATEWAY__STORES__DATA_DIR"


def default_state_dir() -> pathlib.Path:
    """``<user data folder>/inkstream/up``: ``$XDG_DATA_HOME/inkstream/up`` (default
    ``~/.local/share/inkstream/up``) on Linux, the platform's equivalent elsewhere (platformdirs).
    """
    return platformdirs.user_data_path("inkstream", appauthor=False) / "up"


def open_state_dir(path: pathlib.Path, fresh: bool) -> IO[str]:
    """Create (after deleting it when ``fresh``) the state folder and take its lock; returns the open
    lock file (held until closed). Raises BlockingIOError when another ``inkstream up`` holds it,
    OSError when the folder cannot be made.
    """
    lock_path = path / "up.lock"
    if fresh and path.exists():
        lock = _lock(lock_path) if lock_path.exists() else None  # never clear a folder in use
        shutil.rmtree(path)
        if lock is not None:
            lock.close()
    path.mkdir(parents=True, exist_ok=True)
    return _lock(lock_path)


def _lock(lock_path: pathlib.Path) -> IO[str]:
    fh = open(lock_path, "a+")  # noqa: SIM115 - held for the command's lifetime
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise
    return fh


def main(argv: list[str]) -> int:
    """``inkstream up [--model DIR] [--port P] [--grpc-port P] [--encoders N] [--decoders N]
    [--state-dir DIR] [--fresh] [--log-dir DIR]``.

    Returns the exit code.
    """
    ap = argparse.ArgumentParser(prog="inkstream up", description=HELP, epilog=HELP_EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint directory (default: the embedded compact model)")
    ap.add_argument("--port", type=port_number, default=None,
                    help="gateway HTTP port (default 8080, or a free one when 8080 is taken; 0 = any free port)")
    ap.add_argument("--grpc-port", type=port_number, default=None,
                    help="gateway gRPC port (default 50050, or a free one when 50050 is taken; 0 = any free port)")
    ap.add_argument("--encoders", type=int, default=1, help="encoder replicas (default 1)")
    ap.add_argument("--decoders", type=int, default=1, help="decoder replicas (default 1)")
    ap.add_argument("--state-dir", type=pathlib.Path, default=None,
                    help="folder for jobs, results and logs, kept across restarts "
                         f"(default: {default_state_dir()})")
    ap.add_argument("--fresh", action="store_true",
                    help="delete the state folder first: every job, result and log of earlier runs")
    ap.add_argument("--log-dir", help="directory for the processes' logs (default: STATE_DIR/logs)")
    ap.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for readiness")
    args = ap.parse_args(argv)
    if args.encoders < 1 or args.decoders < 1:
        ap.error("--encoders and --decoders must be >= 1")
    if not args.startup_timeout > 0:
        ap.error(f"--startup-timeout must be a number of seconds > 0, not {args.startup_timeout:g}")
    if args.model is not None:
        try:
            check_model_dir(args.model)
        except FileNotFoundError as exc:
            print(f"inkstream up: {exc}", file=sys.stderr)
            return 2
    if args.port and args.port == args.grpc_port:
        ap.error(f"--port and --grpc-port are both {args.port}: the REST and gRPC APIs need a port each")
    ports = {}
    for flag, given in (("--port", args.port), ("--grpc-port", args.grpc_port)):
        port = DEFAULT_PORTS[flag] if given is None else given
        if port and not port_free(port):
            if given is not None:
                print(f"inkstream up: port {port} is in use; choose another with {flag} (0 = any free port)",
                      file=sys.stderr)
                return 2
            port = free_port()
            print(f"inkstream up: the default port {DEFAULT_PORTS[flag]} is in use; using {port} instead "
                  f"(choose one with {flag})", file=sys.stderr)
        ports[flag] = port

    state_dir = (args.state_dir or default_state_dir()).expanduser().resolve()
    try:
        lock = open_state_dir(state_dir, args.fresh)
    except BlockingIOError:
        print(f"inkstream up: the state folder {state_dir} is in use by another inkstream up; stop it or "
              "choose another with --state-dir", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"inkstream up: cannot use the state folder {state_dir}: {exc}", file=sys.stderr)
        return 2
    with lock:
        if args.log_dir:
            try:
                pathlib.Path(args.log_dir).expanduser().mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                print(f"inkstream up: cannot use the log folder {args.log_dir}: {exc.strerror or exc}", file=sys.stderr)
                return 2
        return _run(args, ports, state_dir)


def _run(args: argparse.Namespace, ports: dict[str, int], state_dir: pathlib.Path) -> int:
    """Start, supervise and stop the stack with its state in ``state_dir`` (locked by the caller)."""
    stopping = False
    failed = ""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:  # a second Ctrl-C: do not wait for the drain
            stack.kill_all()
        stopping = True

    # Logs and the gateway's stores live in the state folder and are kept (appended to) across runs.
    log_dir = pathlib.Path(args.log_dir).expanduser() if args.log_dir else state_dir / "logs"
    env = {DATA_DIR_ENV: os.environ.get(DATA_DIR_ENV) or str(state_dir / "gateway")}
    stack = LocalStack(args.model, encoders=args.encoders, decoders=args.decoders, gateway_port=ports["--port"],
                       gateway_grpc_port=ports["--grpc-port"], log_dir=log_dir, env=env,
                       startup_timeout_s=args.startup_timeout)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"inkstream up: starting {args.encoders} encoder(s), {args.decoders} decoder(s) and the gateway "
              f"(state in {state_dir}; logs in {stack.log_dir}) ...", file=sys.stderr, flush=True)
        try:
            stack.start()
        except PortTaken as exc:  # free when checked above, taken by another process since (a race)
            failed = str(exc)
            flag = "--port" if exc.api == "REST" else "--grpc-port"
            print(f"inkstream up: port {exc.port} (the gateway's {exc.api} API) was free at the start but another "
                  f"process took it while the stack was starting; choose another with {flag} (0 = any free port)",
                  file=sys.stderr)
            return 2
        except (RuntimeError, FileNotFoundError) as exc:
            failed = str(exc)
            print(f"inkstream up: {exc}", file=sys.stderr)
            return 1
        print(f"inkstream is up: {stack.gateway_url}  (gRPC {stack.gateway_grpc_addr}; model {stack.model_dir}; "
              f"encoders {', '.join(stack.encoder_addrs)}; decoders {', '.join(stack.decoder_addrs)}). Ctrl-C stops.",
              flush=True)
        for line in metrics_urls(stack):
            print(f"  metrics: {line}", flush=True)
        failed = watch(stack, lambda: stopping)
        if failed:
            print(f"inkstream up: {failed}; stopping (logs kept in {stack.log_dir})", file=sys.stderr)
            return 1
        print(f"inkstream up: stopping (draining requests in flight, up to {stack.gateway_drain_s:g} s; "
              "Ctrl-C again stops at once) ...", file=sys.stderr, flush=True)
        return 0
    finally:
        stack.close()
        for s, h in old.items():
            signal.signal(s, h)


def watch(stack: LocalStack, stopping: Callable[[], bool], poll_s: float = 0.5, max_restarts: int = 3,
           window_s: float = 120.0, backoff_s: float = 1.0) -> str:
    """Supervise the running stack until ``stopping()``; returns "" or why the stack cannot go on.

    An encoder or decoder replica that exits is started again on its ports (:meth:`LocalStack.restart`;
    the gateway routes around it meanwhile and its health watch sees it come back, as a Kubernetes
    Deployment would restart a pod; the n-th restart in the window waits ``backoff_s`` x 2^(n-1)
    seconds first), at most ``max_restarts`` times in ``window_s`` seconds; one that
    exits faster is left down and reported (a crash loop: its log says why). The gateway exiting,
    or every replica of a service left down, ends the stack.
    """
    restarts: dict[tuple[str, int], list[float]] = {}
    given_up: set[tuple[str, int]] = set()
    while not stopping():
        for service, flags in stack.alive().items():
            dead = [i for i, ok in enumerate(flags) if not ok]
            if service == "gateway":
                if dead:
                    return "every gateway process exited"
                continue
            for i in dead:
                if (service, i) in given_up:
                    continue
                now = time.monotonic()
                recent = [t for t in restarts.get((service, i), []) if now - t < window_s] + [now]
                restarts[(service, i)] = recent
                if stopping():
                    return ""
                if len(recent) <= max_restarts:
                    # 1, 2, 4 s: not at once into the same fault
                    time.sleep(min(backoff_s * 2 ** (len(recent) - 1), 10.0))
                    print(f"inkstream up: {service} {i} exited (log {stack.log_path(service, i)}); starting it again "
                          f"({len(recent)} of at most {max_restarts} restarts in {window_s:.0f} s)", file=sys.stderr)
                    stack.restart(service, i)
                else:
                    given_up.add((service, i))
                    left = len(flags) - sum(1 for j in range(len(flags)) if (service, j) in given_up)
                    print(f"inkstream up: {service} {i} keeps exiting ({max_restarts} restarts in {window_s:.0f} s); "
                          f"left down (log {stack.log_path(service, i)}); {left} {service} replica(s) left",
                          file=sys.stderr)
            if flags and all((service, j) in given_up for j in range(len(flags))):
                return f"every {service} process exited"
        time.sleep(poll_s)
    return ""


def metrics_urls(stack: LocalStack) -> list[str]:
    """One ``"SERVICE I: URL"`` line per running process: its Prometheus ``/metrics`` endpoint."""
    lines = [f"{service} {i}: http://127.0.0.1:{port}/metrics"
             for service in ("encoder", "decoder") for i, port in enumerate(stack.metrics_ports[service])]
    if stack.addrs["gateway"]:
        lines.append(f"gateway: {stack.gateway_url}/metrics")
    return lines


def port_number(text: str) -> int:
    """``--port`` / ``--grpc-port``'s type: a TCP port, 0 to 65535 (0: any free port);
    argparse.ArgumentTypeError (exit 2 with the flag named) otherwise.
    """
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; 0 = any free port)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535; 0 = any free port)")
    return port




if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
