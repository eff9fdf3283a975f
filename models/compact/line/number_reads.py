"""Number cells on the PP tower: a Latin piece that its CTC read head reads as one number (issue 37).

The Latin tower's attention decoder misreads clean number cells in ways no reading of the ink
supports: a doubled last digit (``977`` -> ``9777`` in a 53-58 px crop), a leading minus dropped at
some horizontal phases, ``.``/``,`` swapped or a space put inside a number as the straightening of
the crop changes by less than 0.01 degree. Its language model is all it adds to a number, and the
digits of a number are not predictable from each other. The same tower's CTC *read head*
(:mod:`models.compact.line.doubt`; per stride-8 frame its most likely Latin class, the third column
of ``read_top``) has no language model: it sees the minus the decoder drops and spells no digit it
has no frame for. Its greedy reading is good enough to tell a number from words, not to spell it.

Measured per number cell where printed (``bench/number_cells.py`` pages: English, seeds 3 and 7, 8
pages each, 4,207 scored cells; 1,080 of them on pages the served routing keeps on the Latin tower, the
rest on scan-like pages the doubt rules send to the PP tower whole), exact reads of:

=============================================  ===========  =====================
reading                                        all cells    Latin-tower cells
=============================================  ===========  =====================
(a) Latin tower + its decoder, as served       99.52 %      98.89 % (1,068)
(b) the same pieces on the PP tower (numbers)  99.81 %      100.00 % (1,080)
(c) the Latin read head's greedy CTC text      83.29 %      95.00 % (1,026)
=============================================  ===========  =====================

(a)'s errors on Latin cells: 6 minus dropped (``-41,944`` -> ``41,944``), 6 others (``-0.0340`` ->
``-0,0340``, ``0.0119`` -> ``0.01:19``, ``-7`` -> ``-T``, ``-16`` -> ``-1 6``); (c) merges a doubled digit
with no blank frame between (``64,498`` -> ``64,48``), loses separators and, on scans, minus signs. (c)
is a number (:func:`is_number`) for 1,078 of the 1,080 Latin cells (``-1 6``, ``-1:3,052`` are not).

With the rule (main 8f85ef3 -> this; before = the same build with :attr:`numbers_to_pp
<models.compact.encoder_half.CompactEncoderHalf.numbers_to_pp>` off, which is main's routing),
``bench/tables.py --pages 8 --no-others`` cell recall / numbers kept / TEDS: seed 3 99.67 / 99.67 / 0.9698
-> 99.88 / 99.91 / 0.9702; seed 7 99.64 / 99.82 / 0.9817 -> 99.72 / 99.91 / 0.9818; seed 10 99.51 / 99.61 /
0.9625 -> 99.76 / 99.89 / 0.9629; seed 11 99.61 / 99.87 / 0.9737 -> 99.72 / 100.00 / 0.9739. Every English
page whose numbers the rule moved read as well or better; Chinese and scan-like pages are on the PP
tower already (nothing moved). The receipts (12 documents from seed 10,000), doc pages (12 from seed
300) and layout pages (4) read identically (a page number or a few form values moved, read alike).

So the encoder half sends a Latin piece whose read-head reading is one number (:func:`is_number`)
to the PP tower, whose recogniser's CTC spikes spell a segment that is one number
(:mod:`models.compact.decode.numbers`). The decision is made where the crop is encoded, from the
forward that gives its Latin vision tokens (no extra forward for a piece cut from a line; a line
read whole reuses the routing forward's), so the torch and onnxruntime runtimes route alike.
A word line is routed as before: its reading has a letter.

A decimal number read with a space inside its fraction goes there too (:func:`is_spaced_number`): where the crop's phase
opens a gap between two digits the read head and the decoder both put a space in (``-0.1298`` read
``-0.1 298`` on a clean cell, ``bench/tables.py --seed 7``); the PP tower read it whole. Measured on the
Latin word cells of seeds 3 and 7 (210 pieces; ``/tmp``-only script, cells matched to their truth
text), exact reads: served 204, the same crops on the PP tower 207, the read head's greedy text 192;
the served text and the read head disagree on 15, of which the served text is right on 13 and the PP
tower on 14. A word is not moved: the PP tower's own misreads (``Utilities`` -> ``Utilitie``) would
cost what its fixes gain, and the decoder's text is not known where the crop is routed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from models.compact.line.image import WIDTH_MULTIPLE, normalised_width
from models.compact.line.piece import Piece
from models.compact.vocab import CHARSET, SPECIALS

#: The Latin read head's classes: its class ``i`` is the Latin vocabulary's id ``i`` (blank = ``<pad>``).
READ_CLASSES: tuple[str, ...] = (*SPECIALS, *CHARSET)
#: One number as printed in a table cell: an optional sign / parenthesis / currency, digits with
#: group and decimal marks (a decimal mark may lead: ``-.5``), an optional percent / closing parenthesis;
#: nothing else (no space, no letter).
NUMBER = re.compile(r"[-+(\$]{0,3}\.?[0-9][0-9,.]*[)%]{0,2}")


def read_text(top: np.ndarray | None, n_frames: int) -> str | None:
    """The read head's greedy CTC reading of one line: ``top`` [T, 3] float (a row of ``read_top``:
    the third column is the most likely class's id; frames past ``n_frames`` are padding) -> its
    classes with repeats merged and blanks (and other special classes) dropped, as text. None when
    ``top`` is None or has no id column (an ``encoder.onnx`` exported before the ids).
    """
    if top is None or np.ndim(top) != 2 or np.shape(top)[1] < 3:
        return None
    ids = np.rint(np.asarray(top, dtype=np.float32)[: max(0, n_frames), 2]).astype(np.int64)
    out, prev = [], -1
    for i in ids.tolist():
        if i != prev and len(SPECIALS) <= i < len(READ_CLASSES):
            out.append(READ_CLASSES[i])
        prev = i
    return "".join(out)


def is_number(text: str | None) -> bool:
    """Whether a read-head reading (:func:`read_text`) is one number (:data:`NUMBER`: e.g. ``977``,
    ``-1,234``, ``(5.20)``, ``12.5%``, ``$40``); False for None, words, dates with letters, two numbers
    with a space between.
    """
    return bool(text) and NUMBER.fullmatch(text or "") is not None


def is_spaced_number(text: str | None) -> bool:
    """Whether a read-head reading is one decimal number with a gap read inside its fraction
    (``-0.1 298``, ``(3.14 15)``): the first word ends in a decimal point and digits, every later word
    is digits (a closing mark after the last), and the text without its spaces :func:`is_number`. The
    read head and the Latin decoder both put a space into a number where a crop's straightening or
    phase opens a gap between two digits (``-0.1298`` read ``-0.1 298``; ``bench/tables.py --seed 7``);
    the PP tower reads it whole. Not a number whose thousands are grouped by spaces (``5 946 964``,
    ``12 345``: the PP tower drops those spaces, ``bench/statements.py --seed 0`` page 1) nor two numbers
    side by side (``2019 2020``, ``1.5 2.5``): their spaces are printed. False for None and words.
    """
    if not text or " " not in text or text != text.strip() or "  " in text:
        return False
    first, *rest = text.split(" ")
    return (SPACED_HEAD.fullmatch(first) is not None and all(SPACED_TAIL.fullmatch(w) for w in rest)
            and is_number(text.replace(" ", "")))


#: :func:`is_spaced_number`'s first word (a number ending in a decimal point and digits) and later words.
SPACED_HEAD, SPACED_TAIL = re.compile(r"[-+(\$]{0,3}[0-9,]*\.[0-9]+"), re.compile(r"[0-9]+[)%]{0,2}")


def number_routes(pieces: list[Piece], read_lines: Callable[[list[np.ndarray], list[int]], tuple[Any, ...]],
                  prepare_lines: Callable[[list[Image.Image]], list[np.ndarray]]) -> list[Piece]:
    """A page's pieces (:class:`~models.compact.line.piece.Piece`) -> the same, every Latin piece whose
    reading :func:`is_number` or :func:`is_spaced_number` sent to the PP tower (tokens None). A Latin
    piece without tokens (cut from its line, or changed after routing) is encoded first:
    ``prepare_lines`` (crops -> bucketed [1, 32, W] lines) and ``read_lines``
    (:meth:`models.compact.line.towers.PPTower.read_lines`: the second of what it returns are the
    tokens, the fourth the readings) give both from one forward, so the piece is not encoded again.
    ``pieces`` is updated in place where a piece gets its tokens.
    """
    todo = [i for i, p in enumerate(pieces) if not p.pp and p.tokens is None]
    if todo:
        crops = [pieces[i].crop for i in todo]
        frames = [normalised_width(c.width, c.height) // (WIDTH_MULTIPLE // 2) for c in crops]
        _, tokens, _, reads = read_lines(prepare_lines(crops), frames)
        for i, t, r in zip(todo, tokens, reads, strict=True):
            pieces[i] = pieces[i]._replace(tokens=t, read=r)
    return [p._replace(pp=True, tokens=None) if not p.pp and (is_number(p.read) or is_spaced_number(p.read)) else p
            for p in pieces]
