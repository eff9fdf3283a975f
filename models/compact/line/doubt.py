"""How unsure the Latin tower is of a line: the routing signal that sends degraded print to the PP tower.

The Latin tower was trained with an auxiliary CTC head on its stride-8 features (hybrid CTC /
attention, :class:`models.compact.model.CompactOCR`); a bilingual checkpoint ships that head as its
*read head* (``read_head.*`` tensors: a linear layer 192 -> 256 Latin classes, blank = class 0,
copied from the training state whose encoder weights the checkpoint carries:
``training/compact/read_head.py``). Per frame the encoder gives (log-probability of the most likely
class, log-probability of the blank, that class's id) -- ``read_top`` [N, W/8, 3] float32 (files exported
before the ids: [N, W/8, 2]), an output of the bilingual
``encoder.onnx`` (:mod:`models.compact.export.line_onnx`) or of the torch runtime.

* :func:`line_doubt`: the mean negative log-probability of the line's character spikes (frames
  whose most likely class is not the blank), in nats; 0 for a line with no spike. A clean line the
  tower reads is ~0.01-0.05; a faded, dotted, faxed or blurred one 0.1-0.4.
* :func:`doubt_routes`: the tower of each line of a page from the script head's routes and the
  doubts: a page where at least ``page_share`` of the Latin lines have a doubt above ``doubtful``
  (it looks like a scan the Latin tower was not trained on) goes to the PP tower whole; on another
  page a line goes to the PP tower alone when its doubt is above ``alone_above``. The bars are in
  the checkpoint's config.json (``read_head``), with where they come from.

How the bars were chosen (24 generated documents, seeds 0-23 of :mod:`training.compact.scan_docs`,
1,181 lines read by both towers; and the 9 single pages of ../shared/eval/pages, 822 lines): with
``doubtful`` 0.2 and ``page_share`` 0.2 the Latin lines of the documents read at 2.82 % CER (Latin
tower alone 6.37 %, PP tower alone 2.19 %) while no eval page goes to the PP tower (their largest
share of lines above 0.2 is 7 %: a margin of about 3x). Lines alone are not routed
(``alone_above`` infinite): at 0.2, 4 % of the eval pages' lines went to the PP tower and one eval page
read worse (tracemonkey 2.24 -> 2.52 % CER in-process), though the documents gained (2.36 %); a
doubtful bar of 0.15 would read the documents at 2.23 %, but one eval page sits at a share of 0.20
there: no margin.

Faint print is the other sign of a scan the Latin tower reads worse (generated thermal receipts:
Latin tower 4.04 % CER, PP tower 1.65 %; their lines' doubts are as low as a clean page's): a page
whose median line contrast is below ``faint_below`` (config ``faint_median_below``, 120 gray levels)
goes to the PP tower whole. Every page of ../shared/eval/pages has a median of 255; the faded thermal
and Chinese receipts of ``bench/receipts.py`` 50-128, its other documents 183-255.

Gray print read with doubt is the third (the scan rule, :data:`SCAN_CONTRAST_BELOW`): dot-matrix
receipts whose lines are neither faint nor above 0.2 nats, but whose median Latin doubt is above 0.1
(seeds 10,000-10,035 of ``bench/receipts.py``: one such page, 7.38 -> 2.35 % order-free CER; all 36
documents 3.13 -> 2.96 %; its 12 default documents 2.34 -> 1.84 %). Its doubt bar alone would catch
clean rendered pages too (pdfjs_pdkids_p05 has a median of 0.107, unlv_8071_093 0.107), but their print
is black: median contrast 255 on every eval page. Per line the doubt does not tell the towers apart (on
four dot-matrix receipts the lines the PP tower reads worse, dropping the ``x`` of ``2 x 4.00``, sit at
0.05-0.13, those it reads better at 0.02-0.37), so the rule is by page. Its bars were widened from
contrast 230 / doubt 0.1 to 250 / 0.03 after reading every line of 60 more generated documents on
both towers (``training/compact/tower_lines.py``; tuned on seeds 30,000-30,035, checked on
31,000-31,023, neither scored by a bench): the PP tower reads gray print better on most dot-matrix
receipts whatever the Latin tower's doubt (tune: dot-matrix pages 2.02 -> 1.54 % order-free, all
documents 5.04 -> 4.94 %; check: 25.89 -> 25.52 % (one of its pages came out blank), all 9.25 -> 9.18 %;
of the 7 pages it moves, 4 read better (e.g. 31022 3.54 -> 0.79 %), 1 alike and 2 worse: 30014
1.19 -> 1.78 %, 31004 0.66 -> 1.66 %). Rendered pages keep their black print (contrast 255), so it moves none.

A scan of black print has a line contrast of 255 like a rendered page (the scanner's noise clipped at
white), so the gray-print sign missed it: the grain of its paper is the second sign of a scan
(:mod:`models.compact.line.grain`, bar :data:`models.compact.line.grain.GRAIN_ABOVE` 0.15 gray levels,
config ``scan_grain_above``; every rendered page measured is at 0.00-0.04). With it the scan rule moved 4
of 22 tune forms (seeds 30,000-30,045, ``training/compact/tower_lines.py``), all read better on the PP
tower (e.g. 30031 1.53 -> 0.77 %, 30037 1.48 -> 0.99 %); all 46 tune documents 1.23 -> 1.18 %
order-free; check seed 10,009 (form scan, 175 dpi) 3.43 -> 1.47 %.

The PP-OCRv6 recogniser behind the PP tower was trained on real scans and photos; on generated
receipts, forms and faxes (``bench/receipts.py``'s documents) it reads the Latin lines at 2.2 %
CER where the Latin tower reads them at 6.4 % (``training/compact/read_head.py`` prints the table).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from models.compact import checkpoint as ckpt

if TYPE_CHECKING:  # torch only for the torch runtime and the export: this module imports none
    import torch

#: Scan rule of :func:`doubt_routes` (the defaults of config.json ``read_head`` ``scan_median_below`` and
#: ``scan_doubt_median_above``): a page whose median line contrast is below this many gray levels (gray
#: print: a scan, not a rendered page; every page of ../shared/eval/pages has 255) ...
SCAN_CONTRAST_BELOW = 250.0
#: ... and whose Latin lines' median doubt is above this (nats; the doubt of a clean line the tower
#: reads, see :func:`line_doubt`) goes to the PP tower whole. Dot-matrix receipts sit at 0.03-0.16;
#: the PP tower reads most of them better whatever their doubt (module docstring: of 7 gray receipts
#: the 0.1 bar let through, 4 read better, 1 alike, 2 worse); clean rendered pages reach 0.11
#: (pdfjs_pdkids_p05), which the contrast bar keeps out.
SCAN_DOUBT_ABOVE = 0.03

#: the CTC blank's class in the Latin vocabulary (:data:`models.compact.vocab.PAD_ID`)
BLANK_ID = 0


def line_doubt(read_top: np.ndarray, n_frames: int) -> float:
    """The doubt of one line: ``read_top`` [T, 2 or 3] float (per frame: log-probability of the most
    likely class, of the blank, [the class's id]; frames past ``n_frames`` are padding and ignored) -> mean of
    ``-log p`` over the frames whose most likely class is not the blank (nats, >= 0; 0.0 without any).
    """
    x = np.asarray(read_top, dtype=np.float32)[: max(0, n_frames)]
    spikes = x[:, 0] > x[:, 1] + 1e-6  # the top class is not the blank
    if not spikes.any():
        return 0.0
    return float(-x[spikes, 0].mean())


def doubt_routes(script_routes: Sequence[bool], doubts: Sequence[float], doubtful: float, page_share: float,
                 alone_above: float = float("inf"), contrasts: Sequence[float] = (),
                 faint_below: float = 0.0, scan_below: float = 0.0,
                 scan_doubt_above: float = float("inf"), grain: float | Callable[[], float] = 0.0,
                 grain_above: float = float("inf")) -> list[bool]:
    """The tower of each line (True: PP) from the script routing (:func:`models.compact.line.towers.page_routes`)
    and each line's :func:`line_doubt`: every line when at least ``page_share`` of the page's
    Latin-routed lines have a doubt above ``doubtful``, or when the median of the lines' ink
    ``contrasts`` (gray levels, :func:`models.compact.page.prepare.ink_contrast`) is below
    ``faint_below`` (faint print: a faded thermal receipt), or when that median is below
    ``scan_below`` (gray print: a scan, not a rendered page) or the paper ``grain`` of the lines is
    above ``grain_above`` (gray levels, :func:`models.compact.line.grain.paper_grain`: a scan of black
    print; a function giving it is called only when the rest of the rule would route the page), and
    the median doubt of the Latin lines is above ``scan_doubt_above`` (:data:`SCAN_CONTRAST_BELOW`);
    else the script's routes plus each line whose doubt is above ``alone_above``.
    Raises ValueError when the lists' lengths differ.
    """
    if len(script_routes) != len(doubts):
        raise ValueError(f"{len(script_routes)} routes for {len(doubts)} doubts")
    latin = [d > doubtful for r, d in zip(script_routes, doubts, strict=True) if not r]
    if latin and sum(latin) >= page_share * len(latin):
        return [True] * len(doubts)
    if len(contrasts) and float(np.median(contrasts)) < faint_below:
        return [True] * len(doubts)
    latin_doubts = [d for r, d in zip(script_routes, doubts, strict=True) if not r]
    if latin_doubts and float(np.median(latin_doubts)) > scan_doubt_above and (
            (len(contrasts) and float(np.median(contrasts)) < scan_below)
            or grain_above < float("inf") and (grain() if callable(grain) else grain) > grain_above):
        return [True] * len(doubts)
    return [bool(r) or d > alone_above for r, d in zip(script_routes, doubts, strict=True)]


def load_read_head(checkpoint_dir: str | pathlib.Path) -> torch.nn.Linear | None:
    """The checkpoint's read head (``read_head.*``: Linear 192 -> 256, float32, eval), or None
    without one (see the module docstring).
    """
    import torch

    if not ckpt.tensor_names(checkpoint_dir, ckpt.READ_PREFIX):
        return None
    state, _ = ckpt.load_prefixed(checkpoint_dir, ckpt.READ_PREFIX)
    w = state["weight"].float()
    head = torch.nn.Linear(w.shape[1], w.shape[0])
    head.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return head.eval()


def read_top(head: torch.nn.Linear, feats: torch.Tensor) -> torch.Tensor:
    """Stride-8 features [N, T, C] -> [N, T, 3] float32: per frame the log-probability of the read
    head's most likely class, of the blank (class :data:`BLANK_ID`), and that most likely class's id
    (a whole number as float32: the Latin vocabulary's id, :mod:`models.compact.line.number_reads`).
    """
    import torch

    lp = torch.log_softmax(head(feats.float()), dim=-1)
    top = lp.max(dim=-1)
    return torch.stack([top.values, lp[..., BLANK_ID], top.indices.float()], dim=-1)
