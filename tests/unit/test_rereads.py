"""drop_unread_repeats: a stretch the decoder wrote twice where the recogniser read it once is replaced
by the recogniser's reading; text that really repeats, and runs of one character, are kept."""

from models.compact.decode.rereads import drop_unread_repeats, in_repeat

SPACE = ord(" ")


def _ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def _fix(written: str, read: str) -> str:
    """``written`` finished against the recogniser's reading ``read`` (its spikes carry no spaces)."""
    spikes = [ord(c) for c in read if c != " "]
    return "".join(chr(i) for i in drop_unread_repeats(_ids(written), spikes, SPACE))


def test_a_repeat_the_recogniser_did_not_read_is_dropped():
    assert _fix("Guiné Equatoriaorial arbres", "Guiné Equatorial arbres") == "Guiné Equatorial arbres"
    assert _fix("¥3,832,432,438,607.16", "¥3,832,438,607.16") == "¥3,832,438,607.16"
    assert _fix("对新个 文件的 访问 访问 遭", "对新个文件的访问遭") == "对新个 文件的 访问 遭"


def test_a_repeat_written_over_other_characters_takes_the_recogniser_s_reading():
    assert _fix("komprimiert SAPISAPI", "komprimiert SAPI认证一") == "komprimiert SAPI认证一"
    assert _fix("GTK+-vianjanjitysvalinnat", "GTK+-vianjäljitysvalinnat") == "GTK+-vianjäljitysvalinnat"


def test_text_that_really_repeats_is_kept_when_the_recogniser_read_it():
    for text in ("1212-1212", "bonbon", "哈哈哈哈", "研究研究"):
        assert _fix(text, text) == text


def test_runs_of_one_character_are_left_to_the_decoder():
    assert _fix("committee", "comitee") == "committee"  # CTC merges doubled letters
    assert _fix("1000 元", "100元") == "1000 元"
    assert _fix("贤贤易色", "贤易色") == "贤贤易色"


def test_nothing_to_change_returns_the_same_list_and_a_line_without_spikes_is_kept():
    written = _ids("abab")
    assert drop_unread_repeats(written, _ids("abab"), SPACE) is written
    assert drop_unread_repeats(written, [], SPACE) is written  # a whole line is no repeat *inside* a line
    assert drop_unread_repeats([], [], SPACE) == []


def test_in_repeat_needs_two_equal_adjacent_runs_of_two_distinct_tokens():
    assert in_repeat(_ids("xabcabcy"), 4, 7)
    assert in_repeat(_ids("xabcabcy"), 2, 5)  # any window of one period inside the repeat
    assert not in_repeat(_ids("xaaay"), 2, 3)
    assert not in_repeat(_ids("xabcaby"), 4, 6)
    assert not in_repeat(_ids("x" + "abcdefghi" * 2), 1, 10)  # a unit longer than MAX_PERIOD


def _edges(written: str, read: str) -> str:
    from models.compact.decode.finish import QUOTES
    from models.compact.decode.rereads import drop_unread_edge_marks

    marks = {ord(c) for c in QUOTES}
    spikes = [ord(c) for c in read if c != " "]
    return "".join(chr(i) for i in drop_unread_edge_marks(_ids(written), spikes, marks, SPACE))


def test_an_edge_mark_the_recogniser_did_not_read_is_dropped():
    """Receipts seeds 30,000 and 30,021: the decoder opened or closed an amount with a quote the
    recogniser had no spike for (was kept: 1 edit each)."""
    assert _edges("76.84 '", "76.84") == "76.84"
    assert _edges("'27.04", "27.04") == "27.04"
    assert _edges("' 2 x 4.00", "2×4.00".replace("×", "x")) == "2 x 4.00"


def test_marks_the_recogniser_read_and_other_differences_are_kept():
    assert _edges("2 x 12.36.", "2x12.36.") == "2 x 12.36."  # a printed mark has its spike
    assert _edges("Account no.:", "Accountno.:") == "Account no.:"
    assert _edges("Account no.:", "Accountno.") == "Account no.:"  # a colon the recogniser missed (31,009)
    assert _edges("'27.05", "27.04") == "'27.05"  # the line differs elsewhere too: not this step's
    assert _edges("x27.04", "27.04") == "x27.04"  # a letter, not a mark
    assert _edges("''27.04", "27.04") == "''27.04"  # more than one mark
    assert _edges("'", "") == "'"


def test_the_chain_drops_an_unread_edge_quote():
    import torch

    from models.compact.decode.finish import FinishRules, FinishState, finish_segment

    vocab = {c: i for i, c in enumerate(" '.:0123456789", start=3)}
    rules = FinishRules.from_vocab(vocab, eos_ids=[2])
    ids = [vocab[c] for c in "76.84 '"] + [2]
    state = FinishState(torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.long), None,
                        [vocab[c] for c in "76.84"])
    assert list(finish_segment(state, ids, rules)) == [vocab[c] for c in "76.84"] + [2]
