"""Table-level votes on cell texts (gateway/output/table_votes.py, issue 37): the table's decimal mark
in a cell read with the other one, and capital ``I`` for a leading ``l`` in a capitalised column;
through :func:`gateway.output.tables.page_lines` (the page text and the JSON cells). No model needed."""

from __future__ import annotations

from gateway.output.table_votes import decimal_mark_of, decimal_mark_vote, leading_capital_vote, number_form_vote
from gateway.output.tables import page_lines
from inkstream.segments import Cell, cell_join


def _grid(rows: list[list[str]]) -> dict[tuple[int, int], str]:
    return {(r, c): text for r, row in enumerate(rows) for c, text in enumerate(row)}


def _page(rows: list[list[str]]) -> tuple[list[str], list]:
    texts, joins, boxes = [], [], []
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            texts.append(text)
            joins.append(cell_join(Cell(1, r, c)))
            boxes.append((100.0 * c, 30.0 * r, 100.0 * c + 80, 30.0 * r + 20))
    return page_lines(texts, joins, boxes)


def test_decimal_mark_of_reads_only_unambiguous_marks():
    assert decimal_mark_of("1,234.56") == "." and decimal_mark_of("1.234,56") == ","
    assert decimal_mark_of("-0.0153") == "." and decimal_mark_of("-0,0153") == ","
    assert decimal_mark_of("12,34%") == "," and decimal_mark_of("(0,153)") == ","
    for text in ("1,234", "12.345", "1,234,567", "1.234.567", "722", "Iowa", "1,,2", "2019", ""):
        assert decimal_mark_of(text) is None, text


def test_a_table_with_mixed_marks_takes_its_decimal_mark():
    rows = [["Item", "A", "B"],
            ["Iowa", "-0.0153", "1,234.56"],
            ["Ohio", "-0,0153", "12.50%"],   # the comma read for the table's point
            ["Utah", "0.1406", "1.234,56"],  # both marks swapped
            ["Peru", "12,345", "7,35%"],     # 12,345: a thousands group, left
            ["Chad", "0.0871", "-3.10%"], ["Fiji", "-0.1102", "5,678.90"], ["Iran", "0.0044", "88.02%"]]
    out = decimal_mark_vote(_grid(rows))
    assert out[(2, 1)] == "-0.0153" and out[(3, 2)] == "1,234.56" and out[(4, 2)] == "7.35%"
    assert out[(4, 1)] == "12,345" and out[(1, 1)] == "-0.0153" and out[(0, 0)] == "Item"
    lines, [table] = _page(rows)
    assert "Ohio  -0.0153  12.50%" in lines and "-0,0153" not in " ".join(c.text for c in table.cells)


def test_the_decimal_vote_needs_a_clear_majority_and_spares_a_column_of_its_own():
    even = [["1.25", "2,50"], ["3.75", "4,25"], ["5.5", "6,5"]]
    assert decimal_mark_vote(_grid(even)) == _grid(even)  # 3 against 3: no winner
    few = [["1.25", "x"], ["3.75", "y"], ["4,25", "z"]]
    assert decimal_mark_vote(_grid(few)) == _grid(few)  # 2 votes: too few
    # column 1 prints commas throughout (another convention): only its lone point would move, not it
    own = [["1.25", "2,50"], ["3.75", "4,25"], ["5.50", "6,75"], ["7.25", "8.5"], ["9.75", "1,5"],
           ["0.25", "x"], ["1.5", "y"], ["2.5", "z"], ["3.5", "w"], ["4.5", "v"], ["5.5", "u"], ["6.5", "t"],
           ["7.5", "s"], ["8.5", "r"]]
    out = decimal_mark_vote(_grid(own))
    assert [out[(r, 1)] for r in range(5)] == ["2,50", "4,25", "6,75", "8.5", "1,5"]


def test_a_column_case_vote_reads_a_leading_l_as_capital_i():
    rows = [["ltem", "2019"], ["lowa", "1"], ["Ohio", "2"], ["Utah", "3"], ["Maine", "4"], ["ldaho", "5"]]
    out = leading_capital_vote(_grid(rows))
    assert [out[(r, 0)] for r in range(6)] == ["Item", "Iowa", "Ohio", "Utah", "Maine", "Idaho"]
    lines, [table] = _page(rows)
    assert lines[0] == "Item  2019" and {c.text for c in table.cells} >= {"Iowa", "Idaho"}


def test_the_case_vote_leaves_lower_case_columns_and_other_letters():
    lower = [["lb", "x"], ["kg", "y"], ["oz", "z"], ["g", "w"]]
    assert leading_capital_vote(_grid(lower)) == _grid(lower)
    few = [["lowa", "1"], ["Ohio", "2"], ["Utah", "3"]]  # two others: too few to vote
    assert leading_capital_vote(_grid(few)) == _grid(few)
    for odd in ("lL", "l", "owa", "1owa", "l-2"):  # only ``l`` before a small letter is in doubt
        column = [[odd], ["Ohio"], ["Utah"], ["Maine"], ["Texas"]]
        assert leading_capital_vote(_grid(column)) == _grid(column), odd
    half = [["lowa"], ["Ohio"], ["Utah"], ["Maine"], ["texas"], ["peru"]]  # 3 of 5 upper: no vote
    assert leading_capital_vote(_grid(half)) == _grid(half)


def test_a_number_takes_the_tables_closing_parenthesis_and_loses_a_lone_stop():
    rows = [["Item", "(1,234)", "12"], ["Iowa", "(5,678)", "-9,262."], ["Ohio", "(9,012)", "(16,228"],
            ["Utah", "(75,867）", "(12.5%）"]]
    out = number_form_vote(_grid(rows))
    assert out[(1, 2)] == "-9,262" and out[(2, 2)] == "(16,228)" and out[(3, 1)] == "(75,867)"
    assert out[(3, 2)] == "(12.5%)" and out[(0, 1)] == "(1,234)" and out[(0, 0)] == "Item"
    lines, _ = _page(rows)
    assert "Ohio  (9,012)  (16,228)" in lines
    numbered = [["1.", "a"], ["2.", "b"], ["3.", "c"], ["4", "d"]]  # item numbers keep their stops
    assert number_form_vote(_grid(numbered)) == _grid(numbered)
    unclosed = [["(1,234"], ["(5,678)"], ["12"]]  # one closed parenthesis: too few to vote
    assert number_form_vote(_grid(unclosed)) == _grid(unclosed)


def test_a_column_rules_stub_read_as_a_bar_beside_a_number_is_taken_off():
    """Regression (bench/table_causes.py seed 7 page 5 and seed 4 page 0, grid rules: ``30 │``,
    ``19,516 │``, ``79|``, ``391 │``: a stub of the column rule left in the cell's crop was read as a
    bar, and the cell was lost): a bar before or after a cell's one number goes; text cells and bars
    between two words stay."""
    from gateway.output.table_votes import vote_cells

    cells = {(0, 0): "30 │", (0, 1): "79|", (0, 2): "│ -0.1252", (0, 3): "A | B", (0, 4): "Total │",
             (0, 5): "|", (0, 6): "12 34 |", (0, 7): "(1,234)┃"}
    assert vote_cells(cells) == {(0, 0): "30", (0, 1): "79", (0, 2): "-0.1252", (0, 3): "A | B",
                                 (0, 4): "Total │", (0, 5): "|", (0, 6): "12 34 |", (0, 7): "(1,234)"}


def test_a_column_rules_stub_read_as_a_letter_beside_a_number_is_taken_off():
    """Regression (bench/table_causes.py seeds 7 and 10, grid rules: ``734 l``, ``587 l``, ``384 l``: the
    rule's stub read as a small L, a word of its own after the number): the letter goes when the rest
    is one number; words, letters joined to the number and two numbers stay."""
    from gateway.output.table_votes import vote_cells

    cells = {(0, 0): "587 l", (0, 1): "I -0.0459", (0, 2): "Ohio l", (0, 3): "587l", (0, 4): "12 34",
             (0, 5): "l I", (0, 6): "l 12 I", (1, 0): "12", (1, 1): "-0.1", (2, 0): "7", (2, 1): "8"}
    assert vote_cells(cells) == {**cells, (0, 0): "587", (0, 1): "-0.0459"}
    litres = {(r, 0): f"{r + 1} l" for r in range(4)} | {(4, 0): "12"}  # a column of litres keeps its unit
    assert vote_cells(litres) == litres
