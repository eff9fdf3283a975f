"""``inkstream eval`` end to end on a tiny folder, in-process (tiny random checkpoint: the figures
are meaningless, the test checks the command's plumbing, discovery, PDF pages and output)."""

from __future__ import annotations

import pytest
import torch
from PIL import Image, ImageDraw

from evaluation import run as evaluate
from models.compact.export.writer import export_checkpoint
from models.compact.model import CompactOCR, EncoderConfig, decoder_config
from models.compact.vocab import build_tokenizer


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = CompactOCR(EncoderConfig(stem_width=4, channels=(8, 16), layers=(1, 1), compressor_channels=32),
                       decoder_config(build_tokenizer().get_vocab_size(), hidden=32, layers=2)).eval()
    return export_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "tiny", revision="test")


def _page(text: str) -> Image.Image:
    img = Image.new("RGB", (800, 300), "white")
    ImageDraw.Draw(img).text((40, 100), text, fill="black", font_size=36)
    return img


def test_eval_in_process_prints_scores(tmp_path, tiny_ckpt, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    _page("Hello world").save(docs / "a.png")
    (docs / "a.gt.txt").write_text("Hello world\n")
    pages = [_page("page one"), _page("page two")]
    pages[0].save(docs / "b.pdf", save_all=True, append_images=pages[1:], resolution=100)
    (docs / "b.gt.txt").write_text("page one\fpage two")
    rc = evaluate.main([str(docs), "--in-process", "--model", str(tiny_ckpt), "--no-tesseract"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "a.png" in out and "b.pdf" in out and "overall" in out
    assert "pages   2" in out  # the PDF's two pages were rasterised and read


def test_eval_argument_errors(tmp_path, capsys):
    assert evaluate.main([str(tmp_path)]) == 2  # neither --gateway nor --in-process
    assert evaluate.main([str(tmp_path / "missing"), "--in-process"]) == 2
    assert evaluate.main([str(tmp_path), "--in-process"]) == 2  # no documents
    assert "no documents" in capsys.readouterr().err
