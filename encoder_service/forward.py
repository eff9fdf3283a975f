"""One forward pass of the encoder over a batch of pages, with one bad page kept from failing the rest.

:func:`encode_isolated` runs ``half.encode_batch`` on the forward thread; if a batch of several pages
raises, each page is re-run alone, so the result list holds one EncodedPage or one exception per
page. :func:`forward_outcome` says what such a result list means for the replica's health
(:class:`inkstream.fatal.ForwardHealth`). No asyncio state, no gRPC here.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import Any

from inkstream.errors import InkstreamError, InternalError
from inkstream.fatal import is_unrecoverable
from models.base import EncoderHalf, PreparedPage

log = logging.getLogger("inkstream.encoder.batcher")


async def encode_isolated(pool: Executor, half: EncoderHalf, pages: list[PreparedPage]) -> list[Any]:
    """``half.encode_batch(pages)`` on ``pool``; one EncodedPage or exception per page, same order.

    A failing batch of several pages is re-run page by page so that only the culprit fails; a batch
    answered with the wrong number of pages counts as failing (InternalError).
    """
    loop = asyncio.get_running_loop()
    try:
        outs = await loop.run_in_executor(pool, half.encode_batch, pages)
        if len(outs) != len(pages):
            raise InternalError(f"encode_batch returned {len(outs)} pages for a batch of {len(pages)}")
        return list(outs)
    except Exception as exc:  # noqa: BLE001 - isolate the failing page below
        if len(pages) == 1:
            return [exc]
        log.warning("batch of %d pages failed (%s); re-running pages one by one", len(pages), exc)
    results: list[Any] = []
    for page in pages:
        try:
            results.append((await loop.run_in_executor(pool, half.encode_batch, [page]))[0])
        except Exception as one:  # noqa: BLE001 - this page's failure, returned in its place
            results.append(one)
    return results


def forward_outcome(results: list[Any]) -> tuple[bool | None, BaseException | None]:
    """What one forward's results mean for the replica's health: (False, error) when no page of the
    batch was encoded because of the model (errors of the input itself, InkstreamErrors, do not
    count) or a failure is unrecoverable; (True, None) when some page was encoded; (None, None) when
    only the inputs were at fault.
    """
    model_errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, InkstreamError)]
    fatal = next((e for e in model_errors if is_unrecoverable(e)), None)
    if fatal is not None or (model_errors and len(model_errors) == len(results)):
        return False, fatal or model_errors[-1]
    if len(model_errors) < len(results):
        return True, None
    return None, None
