"""A child process that dies with the process that started it (Linux).

The local launcher (:mod:`launcher.processes`) starts each service as ``inkstream serve ...`` with
:data:`PARENT_PID_ENV` set to its own pid. At start the service calls :func:`tie_to_parent`, which
asks the kernel for SIGKILL when that parent dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2)), and exits
at once if the parent is already gone (it died between the fork and the call: the child was
re-parented). So a launcher killed outright (SIGKILL, an OOM kill, a test run cut short) leaves no
encoder, decoder or gateway running behind it; its children get no drain, as nobody would wait for
one. A launcher that stops normally still stops its children itself (SIGTERM, then a drain).

The kernel sends the signal when the *thread* that forked the child ends, so the launcher forks from
one thread that lives as long as its process (:func:`launcher.processes.spawn_service`). The call is
done in the child after ``exec`` rather than in a ``preexec_fn``, which is unsafe in a process with
threads. Elsewhere than Linux, and without the variable, :func:`tie_to_parent` does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

log = logging.getLogger("inkstream.parent_death")

#: environment variable holding the pid of the process the child must not outlive
PARENT_PID_ENV = "INKSTREAM_PARENT_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def tie_to_parent(environ: dict[str, str] | None = None) -> bool:
    """When :data:`PARENT_PID_ENV` names a pid (Linux only): have the kernel SIGKILL this process when
    that parent dies, and exit (status 1, after a line on stderr) if it is no longer the parent.
    Returns whether the tie was made. Raises SystemExit when the parent is already gone; OSError when
    the kernel refuses the call.
    """
    raw = (os.environ if environ is None else environ).get(PARENT_PID_ENV, "")
    if not raw or not sys.platform.startswith("linux"):
        return False
    try:
        parent = int(raw)
    except ValueError:
        log.warning("%s=%r is not a pid; not tied to a parent", PARENT_PID_ENV, raw)
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")
    if os.getppid() != parent:  # the parent died before the tie was made
        print(f"inkstream: the process that started this one (pid {parent}) is gone; exiting", file=sys.stderr)
        raise SystemExit(1)
    return True
