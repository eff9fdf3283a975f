"""``inkstream serve encoder|decoder|gateway [OPTIONS]``: run one service process (one per container)."""

from __future__ import annotations

import importlib
import sys

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
    module, _, func = SERVICES[argv[0]].partition(":")
    return int(getattr(importlib.import_module(module), func)(argv[1:]) or 0)
