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
