"""Unread repeats: text the decoder wrote twice where the recogniser read it once.

An attention decoder's typical slip is to lose its place and write a stretch again
(``Equatorial`` -> ``Equatoriaorial``, ``2,004,334`` -> ``2,004,004,334``, ``SAPI认证一`` ->
``SAPISAPI``); a CTC recogniser cannot do that, since each of its characters is a spike at its own
frames. That is why hybrid CTC/attention recognisers score the decoder's hypotheses against the CTC
alignment (Watanabe et al. 2017, "Hybrid CTC/Attention Architecture for End-to-End Speech
Recognition", IEEE JSTSP 11(8)): the alignment forbids reading the same frames twice.

The bilingual checkpoint's decoder already copies from the recogniser's spikes through a monotonic
pointer (:mod:`models.compact.decode.copy_head`), and :func:`models.compact.decode.copy_head.trim_overrun`
drops a repeat written after the last spike; :func:`drop_unread_repeats` handles the same slip inside
the line, once the segment is finished (:func:`models.compact.decode.finish.finish_segment`): where the
written characters do not match the spikes (an edit alignment,
:func:`models.compact.decode.spacing.solid_opcodes`) and the unmatched written stretch lies inside a
repeat (a run of ``p`` tokens written twice in a row, ``2 <= p <= MAX_PERIOD``, with at least two
distinct tokens), the stretch is replaced by what the recogniser read there (nothing, when it read
nothing). Text that really repeats (``1212``, ``bonbon``) has a spike for every character, so the
alignment matches it and it is kept; runs of one token (``000``, ``ll``, ``贤贤``) are never touched,
since CTC does merge those.

Measured on the decoder's greedy output before the spacing head (``train_zh --eval-only``): held-out
synthetic lines (fonts and texts not trained on), 1,000 of seed 12345 2.75 -> 2.55 % (mixed zh/en
3.38 -> 3.08 %) and 1,500 of seed 2027 2.97 -> 2.88 % (mixed 3.24 -> 3.15 %); 768 new lines in the
training fonts 2.80 -> 2.53 %; of the 3,268 lines 51 better, none worse. The bounds (unit 2 to
:data:`MAX_PERIOD` tokens, two distinct) were set from how the slip looks, before measuring.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from models.compact.decode.spacing import solid_opcodes

#: Longest repeat unit (tokens) that counts as written twice: the decoder's slips repeat a few
#: characters (the held-out samples' longest was 5); a longer one is more likely real text.
MAX_PERIOD = 8


def in_repeat(tokens: list[int], start: int, end: int, max_period: int = MAX_PERIOD) -> bool:
    """True when ``tokens[start:end]`` lies inside two equal adjacent runs ``tokens[s:s+p] ==
    tokens[s+p:s+2p]`` with ``end - start <= p <= max_period`` and at least two distinct tokens in a run.
    """
    n = end - start
    for p in range(max(2, n), max_period + 1):
        for s in range(max(0, end - 2 * p), start + 1):
            run = tokens[s: s + p]
            if s + 2 * p <= len(tokens) and run == tokens[s + p: s + 2 * p] and len(set(run)) >= 2:
                return True
    return False


def drop_unread_repeats(written: list[int], spike_ids: list[int], space_id: int,
                        max_period: int = MAX_PERIOD) -> list[int]:
    """The decoder's ``written`` token ids (``</s>`` excluded) with each repeated stretch the
    recogniser did not read replaced by what it read there (see the module docstring).

    ``spike_ids``: the recogniser's class at each of the line's character spikes, in order
    (:func:`models.compact.decode.spacing.character_spikes`; spaces excluded); ``space_id``: the space token,
    left out of the alignment as the spikes leave it out. A stretch removed outright takes one of the
    spaces around it along. Returns ``written`` itself when nothing changes, else a new list.
    """
    solid, opcodes = solid_opcodes(written, spike_ids, space_id)
    tokens = [written[k] for k in solid]
    edits: list[tuple[int, int, list[int]]] = []  # (first, last) index in written, replacement
    for op in opcodes:
        a, b = op.src_start, op.src_end
        if op.tag in ("delete", "replace") and in_repeat(tokens, a, b, max_period):
            read = list(spike_ids[op.dest_start: op.dest_end]) if op.tag == "replace" else []
            edits.append((solid[a], solid[b - 1], read))
    if not edits:
        return written
    out = list(written)
    for first, last, read in reversed(edits):
        after = last + 1 >= len(out) or out[last + 1] == space_id
        if not read and first > 0 and out[first - 1] == space_id and after:
            first -= 1  # "a XY b" -> "a b", not "a  b"
        out[first: last + 1] = read
    return out


def drop_stuttered_marks(written: list[int], past: list[bool], mark_ids: Collection[int],
                         spike_ids: Sequence[int] = ()) -> list[int]:
    """``written`` (a segment's ids, ``</s>`` excluded) without the copies of its last character that
    the decoder wrote after the recogniser's reading was used up: while the last token equals the
    token before it, was written past the last spike (``past``, one flag per token:
    :func:`models.compact.decode.copy_head.past_last_spike`) and is a punctuation mark (in
    ``mark_ids``) or a class the recogniser itself read twice in a row at the end of the line (the
    last two of ``spike_ids``, its classes at the character spikes), it is dropped. Returns
    ``written`` itself when nothing is dropped, else a new list.

    Why: :func:`models.compact.decode.copy_head.trim_overrun` leaves runs of one token alone (a digit
    the recogniser merged, ``1000``), so a decoder that stutters on a final mark kept it: a form
    label ``Account no.:`` read ``Account no.:::`` on generated scans (seeds 30,004-30,007), the
    recogniser's spikes holding one colon. A mark printed twice has a spike for each copy (CTC
    needs a blank between two equal classes, and a printed mark stands apart), so it is never past the
    last spike; digits and letters, which CTC may merge (``1000`` read with one spike for ``000``),
    are dropped only where the recogniser ended on two spikes of them: it told that run's copies apart,
    so a copy it did not read is the decoder's (``TEL 971-538-6044`` read ``...60444``, spikes
    ``...6044``, seed 30,009).
    """
    doubled = {spike_ids[-1]} if len(spike_ids) >= 2 and spike_ids[-1] == spike_ids[-2] else set()
    n = len(written)
    while n >= 2 and written[n - 1] == written[n - 2] and n - 1 < len(past) and past[n - 1] \
            and (written[n - 1] in mark_ids or written[n - 1] in doubled):
        n -= 1
    return written if n == len(written) else written[:n]


def drop_unread_edge_marks(written: list[int], spike_ids: Sequence[int], mark_ids: Collection[int],
                           space_id: int) -> list[int]:
    """``written`` (a segment's ids, ``</s>`` excluded) without a mark (in ``mark_ids``; the chain passes
    the quotation marks, :func:`models.compact.decode.finish.quote_vocab`) that the decoder wrote first
    or last where the recogniser read none: the written characters (spaces,
    ``space_id``, left out as the spikes leave them out) are the recogniser's ``spike_ids`` exactly,
    plus that one mark at the start or the end. The mark and the spaces between it and the text go.
    Returns ``written`` itself when nothing is dropped, else a new list.

    Why: on faded and dotted receipts the decoder's language prior opens or closes an amount with a
    quote the recogniser has no spike for (``76.84`` read ``76.84 '``, ``27.04`` read ``'27.04``;
    generated receipts of ``bench/receipts.py``, seeds 30,000 and 30,021): a printed mark stands
    apart from its neighbours and is a spike of its own (CTC), so an edge mark without one is the
    decoder's. Only the edges and only one mark: a line whose spikes differ elsewhere too is left to
    the steps before. Quotation marks only: with every punctuation mark, a form label's colon the
    recogniser missed beside the full stop went too (``Account no.:`` -> ``Account no.``, seed 31,009).
    """
    solid = [k for k, t in enumerate(written) if t != space_id]
    if not spike_ids or len(solid) != len(spike_ids) + 1:
        return written
    tokens = [written[k] for k in solid]
    if tokens[0] in mark_ids and tokens[1:] == list(spike_ids):
        return written[:solid[0]] + written[solid[1]:]
    if tokens[-1] in mark_ids and tokens[:-1] == list(spike_ids):
        return written[:solid[-2] + 1] + written[solid[-1] + 1:]
    return written
