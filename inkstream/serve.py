"""``inkstream serve encoder|decoder|gateway [OPTIONS]``: run one service process (one per container).

Started by the local launcher, a service dies with it (:func:`inkstream.parent_death.tie_to_parent`).
"""

from __future__ import annotations

import importlib
import sys

from inkstream.parent_death import tie_to_parent

SERVICES: dict[str, str] = {
    "encoder": "encoder_service.main:main",
    "decoder": "decoder_service.main:main",
    "gateway": "gateway.main:main",
}


def main(argv: list[str]) -> int:
    """Dispatch to the service's own ``main(argv) -> int``."""
    if not argv or argv[0] not in SERVICES:
        print(f"usage: inkstream serve {{{'|'.join(SERVICES)}}} [OPTIONS]  ('--help' after the service name)",
              file=sys.stderr)
        return 2
    tie_to_parent()  # only when the launcher said so (INKSTREAM_PARENT_PID)
    module, _, func = SERVICES[argv[0]].partition(":")
    return int(getattr(importlib.import_module(module), func)(argv[1:]) or 0)
