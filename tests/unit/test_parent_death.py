"""A process tied to its parent (:mod:`inkstream.parent_death`) is killed when that parent is, and
exits at once when the parent is already gone. Plain Python children: no model, no services."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from inkstream.parent_death import PARENT_PID_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
ROOT = str(pathlib.Path(__file__).resolve().parents[2])

# The parent: starts a tied child from a thread that then ends (as a stack started from a worker
# thread), prints the child's pid once the child says it is tied, then waits to be killed.
PARENT = textwrap.dedent("""
    import os, subprocess, sys, threading, time
    from launcher.processes import _SPAWNER
    from inkstream.parent_death import PARENT_PID_ENV
    CHILD = ("import sys, time; from inkstream.parent_death import tie_to_parent; "
             "assert tie_to_parent(); print('tied', flush=True); time.sleep(120)")
    box = []
    def start():
        box.append(_SPAWNER.submit(subprocess.Popen, [sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                                   env={**os.environ, PARENT_PID_ENV: str(os.getpid())}).result())
    t = threading.Thread(target=start)
    t.start(); t.join()
    child = box[0]
    assert child.stdout.readline().strip() == b"tied"
    time.sleep(1.0)  # the starting thread is gone: the child must still run
    print(child.pid, child.poll(), flush=True)
    time.sleep(120)
""")


def _gone(pid: int) -> bool:
    """No such process, or a zombie (killed, not yet reaped by its new parent)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_tied_child_dies_with_its_parent_not_with_the_thread_that_started_it():
    env = {**os.environ, "PYTHONPATH": ROOT}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, env=env,
                              start_new_session=True)
    child_pid = 0
    try:
        line = parent.stdout.readline().decode().split()
        assert len(line) == 2, (line, parent.poll())
        child_pid, status = int(line[0]), line[1]
        assert status == "None" and not _gone(child_pid)  # alive after its starting thread ended
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while not _gone(child_pid):
            assert time.monotonic() < deadline, "the child outlived its parent by 5 s"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(10)
        if child_pid and not _gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_exits():
    # pid 1 is never this child's parent here (pytest is): as if the parent died before the tie
    r = subprocess.run([sys.executable, "-c", "from inkstream.parent_death import tie_to_parent; tie_to_parent()"],
                       env={**os.environ, "PYTHONPATH": ROOT, PARENT_PID_ENV: "1"}, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"is gone; exiting" in r.stderr


def test_without_the_variable_nothing_is_tied():
    from inkstream.parent_death import tie_to_parent

    assert tie_to_parent({}) is False and tie_to_parent({PARENT_PID_ENV: "not-a-pid"}) is False
