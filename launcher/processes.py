"""Child processes of the local launcher: start one ``inkstream serve SERVICE`` with its output in a
log file, and stop a group of them (SIGTERM, i.e. a drain, then SIGKILL after a grace period).

A child dies with the launcher's process (:mod:`inkstream.parent_death`: ``PR_SET_PDEATHSIG``), so
one killed outright leaves nothing running. The kernel ties that signal to the thread that forked
the child, so every child is forked by one thread that lives as long as the process
(:data:`_SPAWNER`), whichever thread starts or restarts a stack.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from inkstream.parent_death import PARENT_PID_ENV

#: the one thread that forks children: it ends only at interpreter exit (then they are killed too)
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inkstream-spawner")


def spawn_service(service: str, args: Sequence[str], log_path: pathlib.Path, env: dict[str, str]) -> subprocess.Popen:
    """Start ``python -P -m inkstream.cli serve SERVICE ARGS...`` in a session of its own, stdout and
    stderr appended to ``log_path``, stdin closed, with exactly the environment ``env`` plus
    :data:`PARENT_PID_ENV` (it dies with this process; see the module docstring).
    Raises OSError when the interpreter cannot be started or the log not opened.
    """
    # -P: the working directory is not put on sys.path, so a folder named like one of our packages
    # there (the clone itself, run from its parent folder) cannot shadow the installed packages.
    cmd = [sys.executable, "-P", "-m", "inkstream.cli", "serve", service, *args]
    log = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    try:
        return _SPAWNER.submit(subprocess.Popen, cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env={**env, PARENT_PID_ENV: str(os.getpid())}, start_new_session=True).result()
    finally:
        log.close()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` with its process group when it leads one (a child of :func:`spawn_service`
    leads its own session, so the group is it and whatever it started: a vLLM engine core, say);
    only signals, never waits, so it is safe inside a signal handler. A process already gone is no
    error.
    """
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)


def terminate(procs: Sequence[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM every process of ``procs`` still running, wait up to ``grace_s`` seconds (all together)
    for them to exit, then SIGKILL the process groups of the ones left (:func:`kill_group`) and reap
    them.
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
            kill_group(p)
            p.wait(timeout=10)
