"""The common tail of ``inkstream serve encoder|decoder|gateway``: logs, tracing, event loop, exit codes.

Exit codes (all three services): 0 after a clean shutdown (drain on SIGTERM, or Ctrl-C); 2 for a
problem the operator can fix from the message (bad tracing settings, port in use, unreadable TLS
files, bad model directory: :class:`~inkstream.errors.InkstreamError`, ``OSError``, ``ValueError``,
``RuntimeError``); 1 for an unexpected failure (logged with its traceback).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from inkstream import logs, malloc, tracing
from inkstream.errors import InkstreamError

log = logging.getLogger("inkstream.serve")


def run_service(service: str, serve: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Set up JSON logs and tracing for ``service`` ("encoder" | "decoder" | "gateway"), run
    ``serve()`` on a new event loop and map its outcome to an exit code (see module docstring).
    """
    prog = f"inkstream serve {service}"
    logs.setup_logging(service)
    try:
        malloc.tune()
        tracing.setup_tracing(f"inkstream-{service}")
    except (ValueError, RuntimeError) as exc:  # bad INKSTREAM_TRACES_* / malloc settings
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    try:
        return int(asyncio.run(serve()) or 0)
    except InkstreamError as exc:
        print(f"{prog}: {exc.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RuntimeError) as exc:  # port in use / not bindable, bad TLS files
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # loading or serving failed: say why, exit 1
        log.exception("%s failed", service)
        print(f"{prog}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
