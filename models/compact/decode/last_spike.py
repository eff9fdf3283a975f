"""A last character the decoder left out: the recogniser's final spike put back.

Past the recogniser's last CTC spike the copy path offers only ``</s>``
(:func:`models.compact.decode.copy_head.pointer_end`), so the decoder of the bilingual checkpoint
ends a line where the recogniser's reading ends. The reverse slip remains: with the pointer still on
the last spike, the decoder's own softmax outvotes the copy and writes ``</s>`` one character early.
Its language model finds a word ending plausible there -- ``Vermon`` for ``Vermont``, ``Utilitie``
for ``Utilities`` (table labels, short crops with no context after them). On ``bench/table_pages.py``
pages (seeds 0 and 1) this was the largest group of misread labels: 4 of 8, each a cell whose spikes
read the whole word with a copy weight of 0.99-1.0 on the character left out (seed 2: two more,
``商誉`` written ``商``).

:func:`restore_last_spike` appends that character when the evidence is unambiguous: the decoder's
non-space text aligns with the spikes
(Levenshtein opcodes, :func:`models.compact.decode.spacing.solid_opcodes`) so that the last edit is
exactly one spike left unread at the end, right after a stretch of at least :data:`MIN_TAIL` matched
character(s), and that spike is a letter or digit (``word_ids``: a speck of noise or a rule at a
crop's edge reads as a mark) read with a copy weight of at least
:data:`models.compact.decode.copy_head.NO_SKIP_WEIGHT` (the copy head's own floor for a spike the
decoder may not skip, set before this step existed).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from models.compact.decode.spacing import solid_opcodes

#: Characters before the left-out one that must match the spikes one for one (the whole alignment
#: must end in them): the decoder was copying the spikes up to there, not writing its own text. One,
#: so a two-hanzi label is covered (``商誉`` written ``商``, ``bench/table_pages.py`` seed 2 page 4).
MIN_TAIL = 1


def restore_last_spike(written: list[int], spike_ids: Sequence[int], last_weight: Callable[[], float],
                       space_id: int, word_ids: Collection[int], min_weight: float) -> list[int]:
    """``written`` (a segment's generated ids, ``</s>`` excluded: the in-process path delivers them
    without it, the decoder service with it, so whether the decoder or the length limit ended the
    segment is not asked; either way one spike was left unread) with the recogniser's last spike
    appended when the decoder stopped one character short of it (module docstring).

    ``spike_ids``: the recogniser's class at each character spike, in order, spaces excluded
    (:func:`models.compact.decode.spacing.spike_classes`); ``last_weight``: gives the copy weight (CTC
    posterior, 0-1) of the last of them, called only when the text qualifies otherwise (reading it
    costs a mask over the line's frames, ~0.3 ms: most segments never need it); ``word_ids``: ids of
    letters and digits; ``min_weight``: the weight the last spike needs. Returns ``written`` itself when
    nothing is appended, else a new list.
    """
    n = len(spike_ids)
    if n < MIN_TAIL + 1 or len(written) < MIN_TAIL or spike_ids[-1] not in word_ids:
        return written
    if [t for t in written[-MIN_TAIL - 1:] if t != space_id][-MIN_TAIL:] != list(spike_ids[-MIN_TAIL - 1: -1]):
        return written  # cheap test first: the written tail is not the spikes' tail before the last
    solid, opcodes = solid_opcodes(written, list(spike_ids), space_id)
    if len(opcodes) < 2:
        return written
    last, before = opcodes[-1], opcodes[-2]
    if last.tag != "insert" or last.src_start != len(solid) or last.dest_start != n - 1:
        return written
    if before.tag != "equal" or before.src_end - before.src_start < MIN_TAIL:
        return written
    if last_weight() < min_weight:
        return written
    return [*written, spike_ids[-1]]
