"""The held-out-face bench (bench/font_pages.py) and the held-out font split (training/compact/render.py):
pages are seeded and their truth is what was drawn; URW Gothic and its TeX Gyre twin Adventor never
reach training; the tower switch refuses what it cannot do. No model is loaded (fast)."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest

from bench.font_pages import confusions, face_files, force_towers, render_page, sentences
from training.compact.render import find_fonts


@pytest.fixture(scope="module")
def gothic() -> list[str]:
    try:
        return face_files("URWGothic")
    except FileNotFoundError:
        pytest.skip("fonts-urw-base35 not installed")


def test_pages_are_seeded_and_truth_is_drawn(gothic):
    pool = sentences()
    a, truth_a = render_page(3, gothic, pool)
    b, truth_b = render_page(3, gothic, pool)
    _, truth_c = render_page(4, gothic, pool)
    assert a.size == (1700, 2200)
    assert truth_a == truth_b and np.array_equal(np.asarray(a), np.asarray(b))
    assert truth_a != truth_c
    assert len(truth_a) >= 20 and all(line.strip() == line and line for line in truth_a)
    ink = np.asarray(a.convert("L")) < 128
    assert 0.005 < ink.mean() < 0.2  # text on the page, not a blank or black sheet


def test_geometric_face_is_held_out_of_training():
    train, held = find_fonts()
    names = [os.path.basename(p) for p in train]
    assert not any(n.startswith(("URWGothic", "texgyreadventor")) for n in names)
    if any(os.path.basename(p).startswith("URWGothic") for p in held):
        assert any(os.path.basename(p).startswith("texgyreadventor") for p in held) or not os.path.isdir(
            "/usr/share/texmf/fonts/opentype/public/tex-gyre")
    assert not any("Hairline" in n or "Thin" in n for n in names)


def test_confusions_count_substitutions_only():
    c = confusions("Tve qvick brown", "The quick brown fox")
    assert c["h->v"] == 1 and c["u->v"] == 1
    assert sum(c.values()) == 2  # the missing " fox" is deletions, not substitutions


def test_force_towers_refuses_unknown_mode_and_missing_pp_tower():
    class Enc:
        _pp = None

        def route(self, crops, page=None):
            return [False] * len(crops), [None] * len(crops), [None] * len(crops)

    engine = types.SimpleNamespace(enc=Enc())
    with pytest.raises(ValueError, match="tower mode"):
        force_towers(engine, "both")
    with pytest.raises(ValueError, match="PP tower"):
        force_towers(engine, "pp")
    engine.enc._pp = object()
    force_towers(engine, "pp")
    routes, tokens, _ = engine.enc.route([1, 2, 3])
    assert routes == [True, True, True] and tokens == [None, None, None]
