"""The OpenAI-compatible routes through the official ``openai`` client, against a real uvicorn server
on loopback with the fake pipeline (which reads the number printed on each page)."""

from __future__ import annotations

import asyncio
import base64
import threading

import httpx
import openai
import pytest
import uvicorn

from gateway.apis.auth import ApiKeys
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from tests.gateway_api.conftest import MODEL_ID, FakePipeline, marked_page, marked_pdf, png_bytes

pytestmark = pytest.mark.timeout(90)
KEY = "sk-test-0123456789"


@pytest.fixture
def server(gw_config):
    """(base_url, fake) of a gateway REST server with one API key, in a thread of its own (the openai
    client used here is synchronous)."""
    fake = FakePipeline(line_mode=True)
    core = GatewayCore(gw_config, fake)
    app = create_app(gw_config, fake, core, api_keys=ApiKeys([KEY]))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        threading.Event().wait(0.02)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", fake
    srv.should_exit = True
    thread.join(10)
    asyncio.run(core.close())


def _data_uri(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def _message(*images: bytes, prompt: str = "<image>\nFree OCR.") -> list[dict]:
    parts = [{"type": "image_url", "image_url": {"url": _data_uri(im)}} for im in images]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]


def test_models_list_and_chat_completion_equal_v1_ocr(server):
    url, fake = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in client.models.list()] == [MODEL_ID]
    page = png_bytes(marked_page(7))
    done = client.chat.completions.create(model=MODEL_ID, messages=_message(page), max_tokens=64)
    text = done.choices[0].message.content
    assert text == "line one of page 7\nline two of page 7"
    r = httpx.post(f"{url}/v1/ocr", files={"file": ("p.png", page)}, data={"format": "text"},
                   headers={"Authorization": f"Bearer {KEY}"})
    assert r.text.rstrip("\n") == text
    assert done.choices[0].finish_reason == "stop"
    assert done.usage.prompt_tokens == 256 and done.usage.completion_tokens == 10
    assert fake.options_seen[0].task == "ocr" and fake.options_seen[0].max_new_tokens == 64


def test_streaming_and_multi_image_pages_in_order(server):
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(model=MODEL_ID, messages=_message(png_bytes(marked_page(3)),
                                                                              png_bytes(marked_page(4))),
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "line one of page 3\nline two of page 3\fline one of page 4\nline two of page 4"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20


def test_a_pdf_image_is_read_as_its_pages(server):
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    done = client.chat.completions.create(
        model="", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": _data_uri(marked_pdf([1, 2]), "application/pdf")}}]}])
    assert done.choices[0].message.content.split("\f") == [
        "line one of page 1\nline two of page 1", "line one of page 2\nline two of page 2"]


def test_wrong_key_gets_the_openai_401(server):
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.models.list()
    assert info.value.status_code == 401
    assert info.value.body["code"] == "invalid_api_key" and info.value.body["type"] == "invalid_request_error"


@pytest.mark.parametrize(("url_part", "message"), [
    ("https://example.com/page.png", "does not fetch URLs"),
    ("data:image/png,notbase64", "must be base64"),
    ("data:image/png;base64,!!!", "not valid base64"),
])
def test_refused_images_get_openai_400(server, url_part, message):
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL_ID, messages=[
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url_part}}]}])
    assert message in info.value.body["message"] and info.value.body["type"] == "invalid_request_error"
    assert info.value.body["param"] == "messages[0].content[0].image_url"


@pytest.mark.parametrize(("data", "status", "code"), [
    (b"this is not an image at all", 415, "unsupported_media_type"),
    (b"%PDF-1.7\n" + b"\0" * 64, 400, "invalid_argument"),  # damaged
])
def test_an_image_the_gateway_cannot_read_is_named_in_param(server, data, status, code):
    # Before: error.param was null, so a client sending several images could not tell which one.
    url, fake = server
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "Free OCR."},
        {"type": "image_url", "image_url": {"url": _data_uri(png_bytes(marked_page(1)))}},
        {"type": "image_url", "image_url": {"url": _data_uri(data)}}]}]
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL_ID, "messages": messages}, timeout=30,
                   headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == "messages[0].content[2].image_url" and err["code"] == code, err


def test_a_task_the_model_does_not_do_names_the_messages(server):
    url, fake = server
    fake.tasks = ("ocr",)
    r = httpx.post(f"{url}/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {KEY}"},
                   json={"messages": _message(png_bytes(marked_page(1)),
                                              prompt="<|grounding|>Convert the document to markdown.")})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages", r.text


def test_a_body_that_is_not_json_is_a_400_without_an_empty_param(server):
    # Before: "invalid chat completion request: : Invalid JSON ..." with param "" (no parameter to name).
    url, _ = server
    r = httpx.post(f"{url}/v1/chat/completions", content=b"not json", timeout=10,
                   headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["message"].startswith("the request body is not valid JSON (") and err["param"] is None
    assert err["type"] == "invalid_request_error"


def test_no_image_unknown_model_and_overload(server):
    url, fake = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="holds no image") as no_image:
        client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "hello"}])
    assert no_image.value.body["param"] == "messages"
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=_message(png_bytes(marked_page(1))))
    assert info.value.body["code"] == "model_not_found"
    fake.capacity = 0
    with pytest.raises(openai.RateLimitError) as rate:
        client.chat.completions.create(model=MODEL_ID, messages=_message(png_bytes(marked_page(1))), stream=True)
    assert rate.value.response.headers["retry-after"] == "3"


def test_markdown_prompt_and_default_task():
    from gateway.apis.openai_messages import task_of

    assert task_of("<image>\n<|grounding|>Convert the document to markdown. ") == "markdown"
    assert task_of("<image>\nFree OCR.") == "ocr"
    assert task_of("What is in this picture?") == ""


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"n": 2}, "n"),
    ({"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
     "response_format"),
    ({"logprobs": True}, "logprobs"),
    ({"logprobs": True, "top_logprobs": 3}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
])
def test_unhonoured_parameters_are_a_400_naming_them(server, kwargs, param):
    """What the gateway cannot honour is refused as vLLM does (400, OpenAI's error shape, ``param``
    set), never silently ignored; through the official client, streaming or not.
    """
    url, fake = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model=MODEL_ID, messages=_message(png_bytes(marked_page(1))),
                                           stream=stream, **kwargs)
        err = info.value.body
        assert info.value.status_code == 400 and err["param"] == param and param in err["message"]
        assert err["type"] == "invalid_request_error" and err["code"].startswith("unsupported_")
    assert fake.pages_run == 0


def test_honoured_values_of_those_parameters_are_answered(server):
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    out = client.chat.completions.create(model=MODEL_ID, messages=_message(png_bytes(marked_page(1))), n=1,
                                         tool_choice="none", response_format={"type": "text"}, logprobs=False)
    assert len(out.choices) == 1 and out.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL_ID, messages=_message(png_bytes(marked_page(1))),
                                       max_tokens=0)
    assert info.value.body["param"] == "max_tokens"


def test_a_password_protected_pdf_does_not_point_to_an_option_the_api_lacks(server):
    # Before: "send its password in the 'password' option" -- the chat completions API has no such
    # option, so a person could not act on it; the message now says where a password can be sent.
    from tests.gateway_api.test_password_unused import encrypted
    url, _ = server
    data = encrypted(marked_pdf([1]), "s3cret-user")
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL_ID, "messages": _message(data)}, timeout=30,
                   headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "messages[0].content[0].image_url" and err["code"] == "password_required", err
    assert "password-protected" in err["message"] and "/v1/ocr" in err["message"], err


def test_a_document_none_of_whose_pages_was_read_is_refused_as_by_v1_ocr(server):
    """Found by the tryout: a chat completion whose every page failed answered 200 with only
    "[page N: error ...]" text, where POST /v1/ocr and a job answer 422 NOTHING_TO_READ: the same
    error now, in OpenAI's shape."""
    import io

    from PIL import Image

    url, fake = server
    tiny = Image.new("L", (4, 4), 255)
    many = io.BytesIO()
    tiny.save(many, "TIFF", save_all=True, append_images=[tiny, tiny])
    body = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": _data_uri(many.getvalue(), "image/tiff")}},
        {"type": "text", "text": "<image>\nFree OCR."}]}]}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "nothing_to_read" and err["message"].startswith("no page could be read (3 of 3 failed)"), err
