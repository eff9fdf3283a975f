"""Child processes of the local launcher: start one ``inkstream serve SERVICE`` with its output in a
log file, and stop a group of them (SIGTERM, i.e. a drain, then SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence


def spawn_service(service: str, args: Sequence[str], log_path: pathlib.Path, env: dict[str, str]) -> subprocess.Popen:
    """Start ``python -P -m inkstream.cli serve SERVICE ARGS...`` in a session of its own, stdout and
    stderr appended to ``log_path``, stdin closed, with exactly the environment ``env``.
    Raises OSError when the interpreter cannot be started or the log not opened.
    """
    # -P: the working directory is not put on sys.path, so a folder named like one of our packages
    # there (the clone itself, run from its parent folder) cannot shadow the installed packages.
    cmd = [sys.executable, "-P", "-m", "inkstream.cli", "serve", service, *args]
    log = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    finally:
        log.close()


def terminate(procs: Sequence[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM every process of ``procs`` still running, wait up to ``grace_s`` seconds (all together)
    for them to exit, then SIGKILL and reap the ones left.
    """
    ps = [p for p in procs if p.poll() is None]
    for p in ps:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + grace_s
    for p in ps:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(timeout=10)
