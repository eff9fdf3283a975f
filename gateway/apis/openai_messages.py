"""The request body of ``POST /v1/chat/completions`` (OpenAI's schema, the parts inkstream reads).

Validated with pydantic; anything wrong is an InvalidParameter (400) naming the field in ``param``;
an image that is refused names its part (``messages[0].content[1].image_url``), also when the
document it holds is refused later, while it is read (:func:`name_param`).
Parameters the gateway cannot honour are refused the same way rather than ignored (as vLLM does):
``n`` > 1 (one reading per request), ``tools`` / ``tool_choice`` other than ``"none"`` / the legacy
``functions`` / ``function_call`` (no tool calling), ``response_format`` other than ``{"type":
"text"}`` (no JSON modes), ``logprobs: true`` / ``top_logprobs`` > 0 (no token log-probabilities). Images come as
``data:`` URIs (RFC 2397) holding base64 document bytes; other URL schemes are refused so the gateway
never fetches a URL it was handed (server-side request forgery). The body is read with the gateway's
upload limit (base64 makes a document about 4/3 as large, plus the JSON around it).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inkstream.errors import InvalidInput, PayloadTooLarge

#: DeepSeek-OCR's prompts (its README, "Prompts examples") -> the gateway's task names.
PROMPT_TASKS = (("<|grounding|>convert the document to markdown", "markdown"), ("free ocr", "ocr"))
_DATA_URI = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[^;,]*)*)(?P<b64>;base64)?,",
                       re.IGNORECASE)
_JSON_OVERHEAD_BYTES = 1 << 20  # the messages' text and JSON syntax around the base64 images


class InvalidParameter(InvalidInput):
    """A 400 about one request parameter: ``param`` its name (OpenAI's ``error.param``), ``code``
    OpenAI's ``error.code`` (``unsupported_parameter``, ``unsupported_value``, ``invalid_value``).
    """

    def __init__(self, message: str, param: str, code: str = "invalid_value"):
        super().__init__(message)
        self.param, self.code = param, code


def name_param(exc: InvalidInput, param: str) -> InvalidInput:
    """``exc`` (its class, status and reason kept) naming ``param`` as the request parameter it is
    about, read by the OpenAI error body as ``error.param``; returns ``exc``.
    """
    setattr(exc, "param", param)  # noqa: B010 - an attribute InvalidInput does not declare
    return exc


class ImageUrl(BaseModel):
    """``{"url": "data:image/png;base64,...", "detail": ...}``."""

    url: str
    detail: str | None = None


class ContentPart(BaseModel):
    """One part of a message's content: text or an image."""

    model_config = ConfigDict(extra="allow")
    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: ImageUrl | None = None


class Message(BaseModel):
    """One chat message; ``content`` a string or a list of parts."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk with the token counts."""

    include_usage: bool = False


class ChatBody(BaseModel):
    """The fields of OpenAI's chat completion request that inkstream reads; others are ignored."""

    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None


def refuse_unhonoured(body: ChatBody) -> None:
    """Raise InvalidParameter (400) for the first parameter of ``body`` the gateway cannot honour
    (see the module docstring); returns for a request it answers as asked.
    """
    if body.n is not None and body.n != 1:
        raise InvalidParameter(f"n={body.n} is not supported: the gateway returns one reading per request "
                               "(n must be 1 or absent)", "n", "unsupported_value")
    if body.tools:
        raise InvalidParameter("tools are not supported: this OCR model does not call tools", "tools",
                               "unsupported_parameter")
    if body.tool_choice is not None and body.tool_choice != "none":
        raise InvalidParameter("tool_choice is not supported (only \"none\"): this OCR model does not call tools",
                               "tool_choice", "unsupported_parameter")
    if body.functions:
        raise InvalidParameter("functions are not supported: this OCR model does not call functions", "functions",
                               "unsupported_parameter")
    if body.function_call is not None and body.function_call != "none":
        raise InvalidParameter("function_call is not supported (only \"none\")", "function_call",
                               "unsupported_parameter")
    if body.response_format is not None and body.response_format.get("type", "text") != "text":
        raise InvalidParameter(f"response_format type {body.response_format.get('type')!r} is not supported: the "
                               'answer is the page text (only {"type": "text"})', "response_format",
                               "unsupported_value")
    if body.logprobs:
        raise InvalidParameter("logprobs are not supported: the gateway does not return token log-probabilities",
                               "logprobs", "unsupported_parameter")
    if body.top_logprobs:
        raise InvalidParameter("top_logprobs is not supported: the gateway does not return token log-probabilities",
                               "top_logprobs", "unsupported_parameter")


@dataclass
class ChatRequest:
    """A validated chat request: ``images`` the decoded documents (bytes) in order, ``image_params``
    where each came from (``messages[i].content[j].image_url``, OpenAI's ``error.param`` of an error
    about it), ``task`` "" (the model's default) | "ocr" | "markdown", ``max_tokens`` per segment
    (0 = decoder default), ``temperature`` (0 = greedy).
    """

    images: list[bytes]
    image_params: list[str] = field(default_factory=list)
    task: str = ""
    model: str = ""
    max_tokens: int = 0
    temperature: float = 0.0
    stream: bool = False
    include_usage: bool = False
    prompt: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def decode_data_uri(url: str, where: str) -> bytes:
    """The bytes of a base64 ``data:`` URI; InvalidParameter (400) with ``param`` ``where`` (the
    image part, e.g. ``messages[0].content[1].image_url``) for anything else.
    """
    m = _DATA_URI.match(url)
    if m is None:
        scheme = url.split(":", 1)[0][:16] if ":" in url else "(none)"
        raise InvalidParameter(f"{where}.url: only data: URIs are accepted (base64 document bytes), not a {scheme!r} "
                               "URL; the gateway does not fetch URLs", where)
    if not m.group("b64"):
        raise InvalidParameter(f"{where}.url: the data: URI must be base64 (data:<type>;base64,<data>)", where)
    try:
        data = base64.b64decode(url[m.end():], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidParameter(f"{where}.url: the data: URI is not valid base64", where) from None
    if not data:
        raise InvalidParameter(f"{where}.url: the image is empty (0 bytes)", where)
    return data


def task_of(prompt: str) -> str:
    """The task a prompt asks for (see :data:`PROMPT_TASKS`); "" = the model's default."""
    text = " ".join(prompt.replace("<image>", " ").split()).strip().rstrip(".").lower()
    for words, task in PROMPT_TASKS:
        if text == words or text.endswith(words):
            return task
    return ""


async def _read_body(request: Request, max_upload_bytes: int) -> bytes:
    limit = max_upload_bytes * 4 // 3 + _JSON_OVERHEAD_BYTES
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is over {limit:,} bytes (the upload limit of "
                                  f"{max_upload_bytes:,} bytes, base64-encoded)")
        chunks.append(chunk)
    return b"".join(chunks)


async def parse_chat_request(request: Request, max_upload_bytes: int) -> ChatRequest:
    """Read and validate the body (see the module docstring). Raises InvalidInput / InvalidParameter
    (400), PayloadTooLarge (413).
    """
    raw = await _read_body(request, max_upload_bytes)
    try:
        body = ChatBody.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        if exc.errors() and exc.errors()[0]["type"] == "json_invalid":  # not JSON at all: no parameter to name
            raise InvalidInput(f"the request body is not valid JSON ({exc.errors()[0]['msg']}); send a chat "
                               "completion request as a JSON object") from None
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        first = exc.errors()[0]["loc"] if exc.errors() else ()
        raise InvalidParameter(f"invalid chat completion request: {problems}",
                               ".".join(str(x) for x in first)) from None
    refuse_unhonoured(body)
    images: list[bytes] = []
    image_params: list[str] = []
    prompt = ""
    for i, msg in enumerate(body.messages):
        if msg.role != "user":
            continue
        texts = []
        parts = msg.content if isinstance(msg.content, list) else [ContentPart(type="text", text=msg.content or "")]
        for j, part in enumerate(parts):
            if part.type == "image_url":
                where = f"messages[{i}].content[{j}].image_url"
                if part.image_url is None:
                    raise InvalidParameter(f"messages[{i}].content[{j}]: image_url part without an image_url", where)
                images.append(decode_data_uri(part.image_url.url, where))
                image_params.append(where)
            elif part.text:
                texts.append(part.text)
        prompt = "\n".join(texts) if texts else prompt
    if not images:
        raise InvalidParameter("the request holds no image: send the page as a user message part "
                               '{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}', "messages")
    return ChatRequest(images=images, image_params=image_params, task=task_of(prompt), model=body.model,
                       max_tokens=body.max_completion_tokens or body.max_tokens or 0,
                       temperature=body.temperature or 0.0, stream=body.stream,
                       include_usage=bool(body.stream_options and body.stream_options.include_usage), prompt=prompt)
