"""Table cells that were lost on ``bench/table_pages.py`` pages (issue 37, ``bench/table_losses.py``):
numbers the decoder wrote with a digit more or a decimal part the cell does not hold (the PP tower's
spikes read them right: models/compact/decode/numbers.py), and a wide value of a right-aligned column
in a table without rules put into the column before it (models/compact/page/table.py ``column_of``).
No model needed."""

from __future__ import annotations

import numpy as np
import torch

from inkstream.segments import Cell, cell_join
from models.compact.decode.finish import FinishRules, finish_segment, finish_state
from models.compact.decode.numbers import number_vocab, numbers_from_spikes
from models.compact.page.boxes import LineBox
from models.compact.page.regions import line_piece
from models.compact.page.table import column_of, table_lines
from models.compact.vocab import EOS_ID, SPACE_ID, build_tokenizer
from models.compact.vocab_zh import ZH_CHARSET

VOCAB = build_tokenizer(ZH_CHARSET).get_vocab()
SERVED = FinishRules.from_vocab(VOCAB, {EOS_ID})
TRAINER = FinishRules(eos_ids=frozenset({EOS_ID}), space_id=SPACE_ID)


def _ids(text: str) -> list[int]:
    return [VOCAB[c] for c in text]


def _state(read: str):
    """The finish state of a line whose recogniser spikes read ``read``, a blank frame after each."""
    q, ids = torch.zeros(2 * len(read), 2), torch.zeros(2 * len(read), 2, dtype=torch.long)
    for i, c in enumerate(read):
        q[2 * i, 0], ids[2 * i, 0] = 0.95, VOCAB[c]
    return finish_state(q, ids, SPACE_ID)


def _finish(read: str, written: str, rules: FinishRules = SERVED) -> str:
    out = finish_segment(_state(read), [*_ids(written), EOS_ID], rules)
    assert out[-1] == EOS_ID
    return "".join(next(k for k, v in VOCAB.items() if v == t) for t in out[:-1])


def test_a_number_the_decoder_lengthened_or_changed_is_taken_from_the_spikes():
    for read, written in [("722", "7222"), ("-5,558", "-5,558.18"), ("33,774", "333774"), ("(79,378)", "(79,338)"),
                          ("(20,554)", "（20,554)"), ("-0.1406", "-0.14%")]:
        assert _finish(read, written) == read, (read, written)
    assert _finish("722", "7222", TRAINER) == "7222"  # rules without the numbers step leave it


def test_words_dates_and_two_cells_stay_with_the_decoder():
    for read, written in [("2019年", "2019年"), ("2O19", "2019"), ("Vermon", "Vermont"), ("12,345", "12,345 678"),
                          ("l00", "100"), ("A-1", "A-1")]:
        assert _finish(read, written) == written, (read, written)
    same = [*_ids("1,234"), EOS_ID]
    assert finish_segment(_state("1,234"), same, SERVED) is same
    nums, digits, like, _ = number_vocab(VOCAB)
    assert numbers_from_spikes([], _ids("1"), nums, digits, like) == []
    assert numbers_from_spikes(_ids("1.5"), _ids(".,"), nums, digits, like) == _ids("1.5")  # no digit read


def test_spikes_with_two_separators_side_by_side_are_no_number():
    """A faded receipt's ``0.76``: the spikes read ``0..76``, the decoder ``0.76`` (seed 30009)."""
    for read, written in [("0..76", "0.76"), ("1.,5", "1.5"), ("12,,000", "12,000")]:
        assert _finish(read, written) == written, (read, written)
    assert _finish("0.76", "0..76") == "0.76"  # a well-formed reading still replaces the decoder's


def test_a_final_mark_or_doubled_digit_written_past_the_spikes_is_dropped():
    """``Account no.:`` read ``Account no.:::::`` with one colon spike (seed 30007); ``6044`` read
    ``6044444`` with spikes ending in two 4s (seed 30009)."""
    assert _finish("Accountno.:", "Account no.:::::") == "Account no.:"
    assert _finish("TEL971-538-6044", "TEL 971-538-6044444") == "TEL 971-538-6044"
    assert _finish("Hal", "Hall") == "Hall"  # one spike for ll: the recogniser merged the run, kept
    assert _finish("a...", "a...") == "a..."  # a mark read as often as written stays
    assert _finish("Total:", "Total:::", TRAINER) == "Total:::"  # rules without the step leave it


def _line(x0: float, y0: float, x1: float, y1: float) -> LineBox:
    return LineBox(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32), (x0, y0, x1, y1), 0.9)


def test_a_line_goes_to_the_column_holding_most_of_it():
    assert column_of((90, 0, 200, 20), [100.0, 300.0]) == 1  # starts in column 0, lies in column 1
    assert column_of((50, 0, 160, 20), [100.0, 300.0]) == 1
    assert column_of((10, 0, 90, 20), [100.0, 300.0]) == 0
    assert column_of((310, 0, 400, 20), [100.0, 300.0]) == 2
    assert column_of((10, 0, 90, 20), []) == 0


def test_a_wide_value_of_a_right_aligned_column_is_its_own_cell():
    """Two right-aligned numeric columns without rules (ends at x 300 and 460): most values are narrow,
    so the gutter lies right of where a wide value of the second column starts."""
    lines = []
    for r in range(12):
        y = 100 + 40 * r
        wide = r in (3, 7)
        lines += [_line(100, y, 180, y + 25), _line(230, y, 300, y + 25),
                  _line(318 if wide else 392, y, 460, y + 25)]
    out = table_lines(lines, [], 1, 25.0, line_piece)
    joins = [j for _, j in out]
    assert joins == [cell_join(Cell(1, r, c)) for r in range(12) for c in range(3)], joins


def test_blocks_within_the_table_join_it_whatever_their_size():
    """A cell or two the page analysis left in blocks of their own, inside the table's box (a skewed
    rule-less page: ``254``, ``(44,191)``), were read after the table, outside its grid."""
    from dataclasses import dataclass, field

    from models.compact.page.table import rows_beside

    @dataclass
    class Group:
        box: tuple[float, float, float, float]
        lines: list = field(default_factory=list)

    table_lines_ = [Group((400, 100 + 40 * i, 500, 124 + 40 * i)) for i in range(10)]
    inside = Group((420, 180, 470, 204), [Group((420, 180, 470, 204))])  # one line, in the table
    edge = Group((495, 460, 560, 484), [Group((495, 460, 560, 484))])  # mostly outside on the right
    below = Group((400, 600, 500, 624), [Group((400, 600, 500, 624))])
    assert rows_beside((400, 100, 500, 484), table_lines_, [inside, edge, below], med_h=24.0) == [0]
