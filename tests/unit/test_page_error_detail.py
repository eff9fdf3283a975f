"""``PageError.detail``: a page error's message without its own page number, for lines that name the
page already (found by the tryout: ``[page 2: error INVALID_ARGUMENT: page 2 could not be rendered]``)."""

from __future__ import annotations

import pytest

from inkstream.page_result import PageError


@pytest.mark.parametrize(("message", "detail"), [
    ("page 3: the page has an invalid size", "the page has an invalid size"),
    ("page 3 could not be rendered: damaged", "could not be rendered: damaged"),
    ("page 3 encode: page of 2200x1 px is too small", "encode: page of 2200x1 px is too small"),
    ("page 31: another page", "page 31: another page"),
    ("no decoder replica answered", "no decoder replica answered"),
    ("page 3", "page 3"),
])
def test_detail_leaves_out_the_pages_own_number_only(message, detail):
    assert PageError("INVALID_ARGUMENT", message).detail(3) == detail
