"""The local process launcher: encoder + decoder (+ gateway) as child processes on loopback.

:class:`LocalStack` starts ``inkstream serve encoder|decoder|gateway`` processes on free
127.0.0.1 ports, waits until every encoder / decoder reports SERVING on ``grpc.health.v1`` and the
gateway answers HTTP, and stops them all (SIGTERM, i.e. a drain, then SIGKILL after a grace period).
It is what ``inkstream up``, ``inkstream ocr`` (temporary stack), the system tests and the benchmarks
use. Child output goes to one log file per process (``log_dir``), shown when a start fails.

Model: ``--model DIR``, else the embedded compact model, else a tiny RANDOM checkpoint
(:func:`launcher.model_dir.resolve_model`).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from launcher.model_dir import resolve_model
from launcher.probes import free_port, grpc_serving, http_up, port_free, scrape_metrics
from launcher.processes import kill_group, spawn_service, terminate

SERVICES = ("encoder", "decoder", "gateway")
#: the gateway's ``drain_grace_s`` (gateway/config.py) as an environment override: the stack reads the
#: one its gateway will see, or sets it to :data:`DRAIN_GRACE_S`, so it knows how long a stop may take
DRAIN_ENV = "INKSTREAM_GATEWAY__DRAIN_GRACE_S"
DRAIN_GRACE_S = 30.0  #: the gateway's drain grace when the environment sets none (its own default)
BACKEND_STOP_GRACE_S = 10.0
PORT_RACE_RETRIES = 3  # respawns (per start) of replicas that lost a free_port race
# What a child logs when its port was taken: grpc (server.add_*_port), uvicorn / http.server (errno 98).
_BIND_FAILURES = ("failed to bind", "could not bind", "cannot bind", "address already in use")


class PortTaken(RuntimeError):
    """The gateway could not bind a port the stack was given (``gateway_port`` / ``gateway_grpc_port``,
    not 0): another process holds it. ``api``: "REST" or "gRPC"; ``port``: the port.
    """

    def __init__(self, api: str, port: int):
        super().__init__(f"the gateway's {api} port {port} is taken by another process")
        self.api, self.port = api, port


class LocalStack:
    """Encoder, decoder and gateway processes on loopback.

    ``model_dir``: checkpoint for both halves (None: embedded model, see :func:`resolve_model`).
    ``encoders`` / ``decoders``: replica counts. ``gateway``: also start ``inkstream serve gateway``
    (tests of the data path alone run the pipeline in-process and pass False). ``gateway_port`` /
    ``gateway_grpc_port``: its REST / gRPC ports, 0 picks a free one. ``extra_args``: more CLI flags per
    service name. ``env``: extra environment for the children (``OMP_NUM_THREADS`` defaults to 1 and
    ``MALLOC_ARENA_MAX`` to 2 per process).
    ``startup_timeout_s``: seconds to wait for all processes to be ready. Raises :class:`PortTaken` (a
    RuntimeError) when the gateway cannot bind a port given here that another process holds, else
    RuntimeError (with the log tail) if one fails. ``log_dir``: where the per-process logs go (default:
    the scratch dir).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike | None = None,
        *,
        encoders: int = 1,
        decoders: int = 1,
        gateway: bool = True,
        gateway_port: int = 0,
        gateway_grpc_port: int = 0,
        extra_args: dict[str, Sequence[str]] | None = None,
        env: dict[str, str] | None = None,
        log_dir: str | os.PathLike | None = None,
        startup_timeout_s: float = 300.0,
    ):
        self._scratch = tempfile.TemporaryDirectory(prefix="inkstream-stack-")
        self.log_dir = pathlib.Path(log_dir or self._scratch.name)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.model_dir_arg = model_dir
        self.model_dir: pathlib.Path | None = None
        self.n = {"encoder": encoders, "decoder": decoders, "gateway": 1 if gateway else 0}
        self.gateway_port = gateway_port
        self.gateway_grpc_port = gateway_grpc_port
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        # MALLOC_ARENA_MAX=2: glibc otherwise gives every thread (gRPC, preprocessing, torch) its own
        # malloc arena, and the fragmentation shows as RSS creeping up over hundreds of pages
        # (bench/memory.py: encoder peak 1.48x -> 1.24x of a one-page run). mallopt(3), M_ARENA_MAX.
        self.env = {"OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2", DRAIN_ENV: f"{DRAIN_GRACE_S:g}", **os.environ,
                    **(env or {})}
        try:
            #: seconds the gateway drains requests in flight after SIGTERM (its ``drain_grace_s``)
            self.gateway_drain_s = max(0.0, float(self.env[DRAIN_ENV]))
        except ValueError:  # the gateway refuses it at start, naming the variable
            self.gateway_drain_s = DRAIN_GRACE_S
        self.startup_timeout_s = startup_timeout_s
        self.procs: dict[str, list[subprocess.Popen]] = {s: [] for s in SERVICES}
        self.addrs: dict[str, list[str]] = {s: [] for s in SERVICES}
        self.metrics_ports: dict[str, list[int]] = {s: [] for s in SERVICES}
        self.gateway_grpc_addr = ""
        self._log_start: dict[tuple[str, int], int] = {}  # log size when each replica was (re)spawned

    # ------------------------------------------------------------ public view

    @property
    def encoder_addrs(self) -> list[str]:
        """``127.0.0.1:port`` of each encoder replica."""
        return list(self.addrs["encoder"])

    @property
    def decoder_addrs(self) -> list[str]:
        """``127.0.0.1:port`` of each decoder replica."""
        return list(self.addrs["decoder"])

    @property
    def gateway_url(self) -> str:
        """``http://127.0.0.1:port`` of the gateway's REST API. Raises RuntimeError without a gateway."""
        if not self.addrs["gateway"]:
            raise RuntimeError("this LocalStack runs no gateway (gateway=False)")
        return f"http://{self.addrs['gateway'][0]}"

    def metrics(self, service: str, i: int = 0) -> dict[str, float]:
        """Scrape ``/metrics`` of an encoder / decoder replica: ``{"name{labels}": value}``."""
        return scrape_metrics(f"http://127.0.0.1:{self.metrics_ports[service][i]}/metrics")

    def log_path(self, service: str, i: int = 0) -> pathlib.Path:
        """Log file (stdout + stderr) of replica ``i`` of ``service``."""
        return self.log_dir / f"{service}-{i}.log"

    def log_tail(self, service: str, i: int = 0, chars: int = 4000) -> str:
        """Last ``chars`` characters of a child's log."""
        p = self.log_path(service, i)
        return p.read_text(errors="replace")[-chars:] if p.exists() else ""

    # ------------------------------------------------------------ lifecycle

    def _spawn(self, service: str, i: int, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        return spawn_service(service, [*args, *self.extra_args.get(service, [])], self.log_path(service, i),
                             {**self.env, **(env or {})})

    def start(self) -> LocalStack:
        """Start every process and wait until all are ready (see the class docstring)."""
        try:
            self.model_dir = resolve_model(self.model_dir_arg, pathlib.Path(self._scratch.name))
            for service in ("encoder", "decoder"):
                for i in range(self.n[service]):
                    self._launch(service, i)
            self._wait(("encoder", "decoder"))
            if self.n["gateway"]:
                self._launch("gateway", 0)
                self._wait(("gateway",))
        except BaseException:
            self.stop(grace_s=2)
            raise
        return self

    def _child_env(self, service: str) -> dict[str, str]:
        """Environment a child gets on top of :attr:`env`: each encoder replica's forward passes use
        the machine's cores divided among the encoders (at most 4; ``INKSTREAM_ENCODER__INTRA_OP_THREADS``
        in ``env`` wins). Why: the encoder's detector forward is the stack's bottleneck, and the decoder
        of a local stack keeps well under one core busy (``bench/compact_vs_tesseract.py``:
        encoder 0.95 / decoder 0.45 cores at 4 documents in flight on 2 cores, one encoder thread).
        """
        key = "INKSTREAM_ENCODER__INTRA_OP_THREADS"
        if service != "encoder" or key in self.env:
            return {}
        return {key: str(max(1, min(4, (os.cpu_count() or 1) // max(1, self.n["encoder"]))))}

    def _launch(self, service: str, i: int, ports: tuple[int, int] | None = None) -> None:
        """Spawn replica ``i`` of ``service`` on ``ports`` (service port, metrics port; encoder and
        decoder only), or on free ports picked now (again, if it lost a port race).
        """
        if service == "gateway":
            # A free gRPC port too, so several stacks never collide on the gateway's default one.
            port, extra = self.gateway_port or free_port(), self.gateway_grpc_port or free_port()
            args = ["--encoders", ",".join(self.addrs["encoder"]), "--decoders", ",".join(self.addrs["decoder"]),
                    "--port", str(port), "--grpc-port", str(extra)]
            self.gateway_grpc_addr = f"127.0.0.1:{extra}"
        else:
            port, extra = ports or (free_port(), free_port())
            args = ["--model", str(self.model_dir), "--port", str(port), "--metrics-port", str(extra)]
        log = self.log_path(service, i)
        self._log_start[(service, i)] = log.stat().st_size if log.exists() else 0
        proc = self._spawn(service, i, args, self._child_env(service))
        if i < len(self.procs[service]):
            self.procs[service][i], self.addrs[service][i] = proc, f"127.0.0.1:{port}"
            if service != "gateway":
                self.metrics_ports[service][i] = extra
        else:
            self.procs[service].append(proc)
            self.addrs[service].append(f"127.0.0.1:{port}")
            if service != "gateway":
                self.metrics_ports[service].append(extra)

    def restart(self, service: str, i: int) -> None:
        """Start encoder or decoder replica ``i`` again on the ports it had (the gateway's replica list
        and health watch then find it back); its log continues in the same file. ValueError for the
        gateway.
        """
        if service == "gateway":
            raise ValueError("the gateway is not restarted: it holds the stack's public ports")
        self._launch(service, i, (int(self.addrs[service][i].rsplit(":", 1)[1]), self.metrics_ports[service][i]))

    def _lost_port_race(self, service: str, i: int) -> bool:
        """Whether replica ``i`` exited because a port :func:`free_port` picked was taken before it
        bound (another process on this machine got there first): its log since the last spawn says so.
        """
        text = self._log_since_spawn(service, i).lower()
        return any(m in text for m in _BIND_FAILURES)

    def _raise_if_given_port_taken(self) -> None:
        """Raise :class:`PortTaken` when a gateway port the stack was given (not 0) cannot be bound."""
        for api, port in (("REST", self.gateway_port), ("gRPC", self.gateway_grpc_port)):
            if port and not port_free(port):
                raise PortTaken(api, port)

    def _ready(self, service: str, i: int) -> bool:
        # Our child must have said it bound its port: another process that took the port before it
        # (a free_port race) would otherwise answer the readiness probe in its place.
        if not self._bound(service, i):
            return False
        if service == "gateway":
            return http_up(f"{self.gateway_url}/readyz")
        return grpc_serving(self.addrs[service][i])

    def _log_since_spawn(self, service: str, i: int) -> str:
        log = self.log_path(service, i)
        if not log.exists():
            return ""
        with open(log, "rb") as fh:
            fh.seek(self._log_start.get((service, i), 0))
            return fh.read().decode(errors="replace")

    def _bound(self, service: str, i: int) -> bool:
        """Whether replica ``i`` of ``service`` logged, since its last spawn, that it listens on its port
        (``inkstream encoder|decoder: listening on HOST:PORT``, ``inkstream gateway: REST on http://HOST:PORT``).
        """
        addr = self.addrs[service][i]
        marker = f"REST on http://{addr}" if service == "gateway" else f"listening on {addr}"
        return marker in self._log_since_spawn(service, i)

    def _wait(self, services: Sequence[str]) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        pending = [(s, i) for s in services for i in range(len(self.procs[s]))]
        respawns = 0
        while pending:
            for s, i in list(pending):
                rc = self.procs[s][i].poll()
                if rc is not None and s == "gateway" and self._lost_port_race(s, i):
                    self._raise_if_given_port_taken()  # respawning on a port another process holds cannot help
                if rc is not None and respawns < PORT_RACE_RETRIES and self._lost_port_race(s, i):
                    respawns += 1
                    self._launch(s, i)
                    continue
                if rc is not None:
                    raise RuntimeError(f"{s} {i} exited with code {rc} while starting; log "
                                       f"{self.log_path(s, i)}:\n{self.log_tail(s, i)}")
                if self._ready(s, i):
                    pending.remove((s, i))
            if not pending:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{s} {i} ({self.addrs[s][i]})" for s, i in pending)
                raise RuntimeError(f"not ready after {self.startup_timeout_s:.0f} s: {names}; last log:\n"
                                   f"{self.log_tail(*pending[0])}")
            time.sleep(0.25)

    def kill(self, service: str, i: int = 0, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL, i.e. ``kill -9``) to replica ``i`` of ``service`` and reap it."""
        p = self.procs[service][i]
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)

    def alive(self) -> dict[str, list[bool]]:
        """Whether each process is still running."""
        return {s: [p.poll() is None for p in ps] for s, ps in self.procs.items()}

    @property
    def gateway_stop_grace_s(self) -> float:
        """Seconds the gateway may take to stop after SIGTERM before it is killed: its drain
        (:attr:`gateway_drain_s`: documents in flight finish or fail page by page), then uvicorn's
        close, up to min(drain, 30 s) and at least 5 s (gateway/main.py), plus a 5 s margin.
        """
        return self.gateway_drain_s + max(5.0, min(self.gateway_drain_s, 30.0)) + 5.0

    def stop(self, grace_s: float | None = None) -> None:
        """SIGTERM (drain) the gateway first, then the encoders and decoders; SIGKILL what is left
        after ``grace_s`` seconds (default: :attr:`gateway_stop_grace_s` for the gateway, whose own
        drain lets in-flight requests finish or fail cleanly, and :data:`BACKEND_STOP_GRACE_S` for the
        then idle encoders and decoders). Safe to call twice; :meth:`kill_all` cuts it short.
        """
        for group, default in ((("gateway",), self.gateway_stop_grace_s),
                               (("encoder", "decoder"), BACKEND_STOP_GRACE_S)):
            terminate([p for s in group for p in self.procs[s]], default if grace_s is None else grace_s)

    def kill_all(self) -> None:
        """SIGKILL every child still running, with its process group (a second Ctrl-C during
        :meth:`stop`); reaping is left to :meth:`stop`. Only signals, so it is safe inside a signal
        handler.
        """
        for ps in self.procs.values():
            for p in ps:
                kill_group(p)

    def close(self) -> None:
        """:meth:`stop`, then delete the scratch directory (logs too unless ``log_dir`` was given)."""
        self.stop()
        self._scratch.cleanup()

    def __enter__(self) -> LocalStack:
        """Start the stack, unless :meth:`start` already did (``with stack.start():`` is common)."""
        if any(p.poll() is None for ps in self.procs.values() for p in ps):
            return self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
