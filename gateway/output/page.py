"""The gateway's import point for the page-result contract, defined once in
:mod:`inkstream.page_result` (shared with the gRPC conversion and the client).

New code imports :mod:`inkstream.page_result` directly; this module only re-exports it so the
gateway modules still importing ``gateway.output.page`` keep working.
"""

from __future__ import annotations

from inkstream.page_result import Block, Box, PageError, PageResult, TableCell

__all__ = ["Block", "Box", "PageError", "PageResult", "TableCell"]
