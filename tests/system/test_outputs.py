"""Searchable PDF, hOCR, the OpenAI-compatible route and JPEG 2000 through a real stack (LocalStack:
encoder, decoder and gateway processes) with the embedded compact model, read back by real consumers:
poppler (pdftotext, pdftoppm), OCRmyPDF's hOCR parser and renderer, the ``openai`` client."""

from __future__ import annotations

import base64
import io
import pathlib
import re
import shutil
import subprocess

import httpx
import openai
import pikepdf
import pytest
from PIL import Image
from rapidfuzz.distance import Levenshtein

from bench.pdfgen import line_pages, make_pdf
from launcher.local_stack import LocalStack

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")]


def _norm(s: str) -> str:
    return " ".join(s.split())


def _cer(ref: str, hyp: str) -> float:
    return Levenshtein.distance(_norm(ref), _norm(hyp)) / max(1, len(_norm(ref)))


@pytest.fixture(scope="module")
def stack(compact_checkpoint):
    with LocalStack(compact_checkpoint, encoders=1, decoders=1, startup_timeout_s=300) as st:
        yield st


def _ocr(url: str, path: pathlib.Path, **fields: str) -> httpx.Response:
    with open(path, "rb") as f:
        r = httpx.post(f"{url}/v1/ocr", files={"file": (path.name, f)}, data=fields, timeout=300)
    assert r.status_code == 200, r.text[:1000]
    return r


def _pages_png(pdf: pathlib.Path, out: pathlib.Path) -> list[bytes]:
    out.mkdir()
    subprocess.run(["pdftoppm", "-r", "100", "-png", str(pdf), str(out / "p")], check=True)
    return [p.read_bytes() for p in sorted(out.glob("p*.png"))]


def test_searchable_pdf_of_the_scotus_page(stack, shared_dir, tmp_path):
    src = shared_dir / "eval" / "pages" / "pdfplumber_scotus_p01.pdf"
    doc = _ocr(stack.gateway_url, src, format="json").json()
    out = tmp_path / "out.pdf"
    out.write_bytes(_ocr(stack.gateway_url, src, format="pdf").content)
    with pikepdf.open(src) as a, pikepdf.open(out) as b:
        assert len(a.pages) == len(b.pages)
        assert [list(p.mediabox) for p in a.pages] == [list(p.mediabox) for p in b.pages]
    assert _pages_png(src, tmp_path / "a") == _pages_png(out, tmp_path / "b")
    ours = "\n".join(p["text"] for p in doc["pages"])
    # -raw: the text in content-stream order, which is our reading order (poppler's default mode
    # re-derives an order of its own from the glyph positions, splitting this page into columns)
    got = subprocess.run(["pdftotext", "-raw", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert _cer(ours, got) <= 0.01, (ours[:400], got[:400])
    page = doc["pages"][0]
    with pikepdf.open(out) as b:
        w_pt = float(b.pages[0].mediabox[2])
    scale = w_pt / page["width"]
    boxes = [[v * scale for v in blk["box"]] for blk in page["blocks"]]
    html = subprocess.run(["pdftotext", "-bbox", str(out), "-"], capture_output=True, text=True, check=True).stdout
    words = re.findall(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)"', html)
    assert words
    # A word may be widened into a too-wide gap beside it, so that poppler's default mode keeps a row in
    # one block (gateway/output/text_band.py), but only as far as it keeps IoU >= 0.53 with its ink: at
    # least half of each word's box lies inside its line's block.
    for x0, y0, x1, y1 in words:
        w = (float(x0), float(y0), float(x1), float(y1))
        assert max(_inside_share(w, b) for b in boxes) >= 0.5, (w, page["text"][:200])


def _inside_share(word: tuple[float, float, float, float], box: list[float]) -> float:
    """Share of ``word``'s area (points) inside ``box`` grown by 1 pt on every side."""
    ix = min(word[2], box[2] + 1) - max(word[0], box[0] - 1)
    iy = min(word[3], box[3] + 1) - max(word[1], box[1] - 1)
    area = max(1e-9, (word[2] - word[0]) * (word[3] - word[1]))
    return max(0.0, ix) * max(0.0, iy) / area


def test_searchable_pdf_of_a_multipage_jpeg_tiff(stack, shared_dir, tmp_path):
    frames = [Image.open(io.BytesIO(p)).convert("RGB") for p in line_pages(shared_dir)[:2]]
    src = tmp_path / "scan.tif"
    frames[0].save(src, "TIFF", save_all=True, append_images=frames[1:], compression="jpeg", dpi=(150, 150))
    doc = _ocr(stack.gateway_url, src, format="json").json()
    assert [p["status"] for p in doc["pages"]] == ["ok", "ok"]
    pngs = []
    with Image.open(src) as tif:  # the same (JPEG-decoded) pixels as PNG read alike
        for i in range(tif.n_frames):
            tif.seek(i)
            path = tmp_path / f"f{i}.png"
            tif.convert("RGB").save(path)
            pngs.append(_ocr(stack.gateway_url, path, format="text").text.strip())
    assert [p["text"].strip() for p in doc["pages"]] == pngs
    out = tmp_path / "out.pdf"
    out.write_bytes(_ocr(stack.gateway_url, src, format="pdf").content)
    with pikepdf.open(out) as b:
        assert len(b.pages) == 2
        assert [round(float(v)) for v in b.pages[0].mediabox] == [0, 0, round(frames[0].width * 72 / 150),
                                                                  round(frames[0].height * 72 / 150)]
    bare = tmp_path / "bare.pdf"  # the same images without a text layer: rendering must not change
    import img2pdf

    bare.write_bytes(img2pdf.convert(str(src)))
    assert _pages_png(bare, tmp_path / "a") == _pages_png(out, tmp_path / "b")
    got = subprocess.run(["pdftotext", "-raw", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert _cer("\n".join(p["text"] for p in doc["pages"]), got) <= 0.01


def test_hocr_through_ocrmypdf(stack, shared_dir, tmp_path):
    import ocrmypdf
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.fpdf_renderer import Fpdf2PdfRenderer
    from ocrmypdf.hocrtransform import HocrParser

    src = shared_dir / "eval" / "pages" / "tess_phototest.tif"
    text = _ocr(stack.gateway_url, src, format="text").text
    hocr = tmp_path / "page.hocr"
    hocr.write_text(_ocr(stack.gateway_url, src, format="hocr").text, encoding="utf-8")
    page = HocrParser(hocr).parse()
    fonts = MultiFontManager(pathlib.Path(ocrmypdf.__file__).parent / "data")
    Fpdf2PdfRenderer(page=page, dpi=300, multi_font_manager=fonts, invisible_text=True).render(tmp_path / "h.pdf")
    got = subprocess.run(["pdftotext", "-raw", str(tmp_path / "h.pdf"), "-"], capture_output=True, text=True).stdout
    assert _cer(text, got) <= 0.01, (text[:300], got[:300])


def test_openai_client_and_jpeg2000(stack, shared_dir, tmp_path):
    png = shared_dir / "eval" / "pages" / "tess_phototest.tif"
    im = Image.open(png).convert("RGB")
    as_png, as_jp2 = tmp_path / "p.png", tmp_path / "p.jp2"
    im.save(as_png)
    im.save(as_jp2, "JPEG2000", irreversible=False)  # lossless: the same pixels
    text = _ocr(stack.gateway_url, as_png, format="text").text.rstrip("\n")
    assert _ocr(stack.gateway_url, as_jp2, format="text").text.rstrip("\n") == text
    client = openai.OpenAI(base_url=f"{stack.gateway_url}/v1", api_key="unused", max_retries=0, timeout=300)
    [model] = client.models.list()
    uri = "data:image/png;base64," + base64.b64encode(as_png.read_bytes()).decode()
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}},
                                             {"type": "text", "text": "<image>\nFree OCR."}]}]
    done = client.chat.completions.create(model=model.id, messages=messages)
    assert done.choices[0].message.content == text
    streamed = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(model=model.id, messages=messages, stream=True) if c.choices)
    assert streamed == text


def _hwm_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_searchable_pdf_memory_is_flat(tiny_ds_checkpoint, shared_dir, tmp_path):
    """Gateway peak RSS for a 200-page searchable PDF within 1.15x of its peak for a 1-page one."""
    pages = line_pages(shared_dir)
    one = make_pdf(pages, 1, tmp_path / "one.pdf")
    many = make_pdf(pages, 200, tmp_path / "many.pdf")
    with LocalStack(tiny_ds_checkpoint, encoders=1, decoders=1, startup_timeout_s=150) as st:
        pid = st.procs["gateway"][0].pid
        for _ in range(2):  # warm: imports, first allocations
            _ocr(st.gateway_url, one, format="pdf")
        base = _hwm_kib(pid)
        r = _ocr(st.gateway_url, many, format="pdf")
        with pikepdf.open(io.BytesIO(r.content)) as pdf:
            assert len(pdf.pages) == 200
        peak = _hwm_kib(pid)
    assert peak <= 1.15 * base, f"peak RSS {peak} KiB for 200 pages vs {base} KiB for 1"
