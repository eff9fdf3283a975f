"""OpenAI-compatible routes: ``GET /v1/models`` and ``POST /v1/chat/completions``.

Tool chains that already call OCR vision-language models through the OpenAI chat completions API
(as vLLM and SGLang serve DeepSeek-OCR: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html)
can point their client at the gateway. What is supported, per the API reference
(https://platform.openai.com/docs/api-reference/chat/create):

* ``messages``: the images of the user messages (``{"type": "image_url", "image_url": {"url":
  "data:<media type>;base64,<data>"}}``; any document type the gateway reads, sniffed by magic bytes)
  are read as pages, in order; ``http(s)://`` and other URL schemes are refused (no server-side
  fetching). The text of the last user message picks the task with DeepSeek-OCR's own prompts:
  ``"Free OCR."`` -> ``ocr``, ``"<|grounding|>Convert the document to markdown."`` -> ``markdown``;
  any other text -> the model's default task.
* ``max_tokens`` / ``max_completion_tokens``: generated tokens at most per segment (the decoder's
  ``max_new_tokens``; a page of a line-level model such as ``compact`` is one segment per line);
  ``temperature`` (0 = greedy, the default; a sampled answer is never taken from the result cache);
  ``stream``: server-sent events of ``chat.completion.chunk`` objects, one content delta per page,
  then ``data: [DONE]``; ``stream_options.include_usage`` adds the usage chunk.
* ``usage``: ``prompt_tokens`` = vision tokens of the pages, ``completion_tokens`` = generated tokens.
* ``model``: optional; a different id than the served one is a 404 ``model_not_found``.
* Refused with a 400 naming the parameter in ``error.param`` (never silently ignored): ``n`` > 1,
  ``tools`` / ``tool_choice`` (other than ``"none"``) / ``functions`` / ``function_call``,
  ``response_format`` other than ``{"type": "text"}``, ``logprobs: true``, ``top_logprobs`` > 0
  (:func:`gateway.apis.openai_messages.refuse_unhonoured`). Other unknown fields are ignored.

Errors use OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` with the status of
the gateway's one error map (:mod:`inkstream.errors`), ``code`` its reason in lower case; an error about
one image (not a data: URI, not a document the gateway reads, over a limit, a PDF's password)
names its part in ``param`` (``messages[0].content[1].image_url``), a task the model does not do
``messages`` (the prompt picks it). The same
API keys, limits, admission (429 + Retry-After), metrics and traces apply as on ``/v1/ocr``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.apis.openai_messages import ChatBody, ChatRequest, InvalidParameter, name_param, parse_chat_request
from gateway.apis.rest_http import StreamWithCleanup
from gateway.apis.rest_schema import chat_route
from gateway.core import GatewayCore
from gateway.service import OcrRequest, run_id
from gateway.session import ocr_bytes
from inkstream.errors import (
    InkstreamError,
    InvalidInput,
    NotFound,
    as_inkstream_error,
    http_status,
    retry_after_header,
)
from inkstream.page_errors import every_page_failed
from inkstream.page_result import PageResult
from inkstream.request_id import current_request_id

#: OpenAI error ``type`` by HTTP status (their API reference, "Error codes").
_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                404: "invalid_request_error", 409: "invalid_request_error", 413: "invalid_request_error",
                415: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error"}


def openai_error(exc: BaseException, code: str | None = None) -> JSONResponse:
    """``exc`` as OpenAI's error object, with the mapped status and ``Retry-After`` when hinted;
    ``param`` / ``code`` from an :class:`InvalidParameter`.
    """
    err = as_inkstream_error(exc)
    status = http_status(err)
    param = getattr(err, "param", None)  # InvalidParameter, or an error named by name_param
    if isinstance(err, InvalidParameter) and code is None:
        code = err.code
    body = {"error": {"message": err.message, "type": _ERROR_TYPES.get(status, "server_error"),
                      "param": param, "code": code or err.reason_name.lower()}}
    return JSONResponse(body, status_code=status, headers=retry_after_header(err))


def _finish_reason(pages: list[PageResult]) -> str:
    return "length" if any(p.finish_reason == "length" for p in pages) else "stop"


def _page_text(page: PageResult) -> str:
    if page.status == "ok":
        return page.text
    assert page.error is not None
    return f"[page {page.index}: error {page.error.code}: {page.error.detail(page.index)}]"


def _usage(pages: list[PageResult]) -> dict[str, int]:
    prompt = sum(p.vision_tokens for p in pages)
    completion = sum(p.generated_tokens for p in pages)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ChatCompletions:
    """One chat completion: each image of the request read as a page through the gateway's
    :class:`gateway.service.OcrService`, in order; built by :func:`openai_router` per request.
    """

    def __init__(self, core: GatewayCore, chat: ChatRequest, request_id: str):
        self.core, self.chat, self.request_id = core, chat, request_id
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _options(self) -> OcrRequest:
        return OcrRequest(format="text", task=self.chat.task, max_new_tokens=self.chat.max_tokens,
                          temperature=self.chat.temperature)

    async def pages(self) -> AsyncGenerator[PageResult, None]:
        """Page results of every image, in order (page indices renumbered 1..n over the images).
        Raises what reading them raises; a 4xx error (InvalidInput) names the image it is about in
        ``param`` (the task is checked first, so that one names ``messages``).
        """
        try:
            await self.core.service.check_task(self.chat.task)
        except InvalidInput as exc:
            raise name_param(exc, "messages") from None
        n = 0
        for image, where in zip(self.chat.images, self.chat.image_params, strict=True):
            try:
                async with ocr_bytes(self.core, self.request_id, image, self._options(), api="openai",
                                     route="/v1/chat/completions") as session:
                    async for page in session.pages():
                        n += 1
                        yield dataclasses.replace(page, index=n)
            except InvalidInput as exc:
                raise name_param(exc, where) from None

    def _chunk(self, model: str, delta: dict[str, Any], finish: str | None) -> bytes:
        body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    async def stream(self, model: str, first: PageResult, rest: AsyncIterator[PageResult]) -> AsyncIterator[bytes]:
        """Server-sent events: the role, one content delta per page (pages separated by a form feed,
        as in ``format=text``), the finish reason, the usage chunk if asked for, ``[DONE]``.
        ``first`` was read before the response started, so that early errors get their status.
        """
        yield self._chunk(model, {"role": "assistant", "content": ""}, None)
        pages: list[PageResult] = []
        nxt: PageResult | None = first
        while nxt is not None:
            yield self._chunk(model, {"content": ("\f" if pages else "") + _page_text(nxt)}, None)
            pages.append(nxt)
            nxt = await anext(rest, None)
        yield self._chunk(model, {}, _finish_reason(pages))
        if self.chat.include_usage:
            body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": model,
                    "choices": [], "usage": _usage(pages)}
            yield f"data: {json.dumps(body)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def complete(self, model: str) -> dict[str, Any]:
        """The whole ``chat.completion`` object; the error of a document none of whose pages was read
        (:func:`inkstream.page_errors.every_page_failed`, as ``POST /v1/ocr`` answers) raised.
        """
        pages = [p async for p in self.pages()]
        if (failed := every_page_failed(pages)) is not None:
            raise failed
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": model,
                "choices": [{"index": 0, "finish_reason": _finish_reason(pages),
                             "message": {"role": "assistant", "content": "\f".join(_page_text(p) for p in pages)}}],
                "usage": _usage(pages)}


def openai_router(core: GatewayCore) -> APIRouter:
    """The routes above for one gateway ``core`` (:class:`gateway.core.GatewayCore`)."""
    router = APIRouter(tags=["OpenAI-compatible"])

    async def served_model() -> str:
        return (await core.service.pipeline.encoder_info()).model_id

    @router.get("/v1/models", summary="The served model (OpenAI-compatible)")
    async def list_models() -> Response:
        try:
            model = await served_model()
        except InkstreamError as exc:
            return openai_error(exc)
        return JSONResponse({"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "inkstream"}]})

    @router.post("/v1/chat/completions", **chat_route(ChatBody.model_json_schema()))
    async def chat_completions(request: Request) -> Response:
        try:
            core.check_accepting()
            chat = await parse_chat_request(request, core.config.limits.max_upload_bytes)
            model = await served_model()
            if chat.model and chat.model != model:
                return openai_error(NotFound(f"the model {chat.model!r} is not served here; this gateway serves "
                                             f"{model!r} (GET /v1/models)"), code="model_not_found")
            run = ChatCompletions(core, chat, run_id(current_request_id(), "x-request-id" in request.headers))
            if chat.stream:
                pages = run.pages()
                cleanup = contextlib.AsyncExitStack()
                cleanup.push_async_callback(pages.aclose)
                try:
                    first = await anext(pages)  # admission and the first page's errors still get a status
                except BaseException:
                    await cleanup.aclose()
                    raise
                return StreamWithCleanup(run.stream(model, first, pages), cleanup, media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            return JSONResponse(await run.complete(model))
        except InkstreamError as exc:
            return openai_error(exc)

    return router
