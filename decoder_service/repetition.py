"""N-gram loop detector: stops a sequence that has started repeating itself.

OCR decoders on real pages fall into loops (the same line or table row again and again until
``max_new_tokens``); vendors report 3-6 % of production pages (DESIGN.md). DeepSeek-OCR's own
serving recipe bans repeated 30-grams within a 90-token window (vLLM ``NoRepeatNGramLogitsProcessor``,
``ngram_size=30, window_size=90``); a serving system should rather *stop* and report the loop than
silently steer the text, so this detector fires when the n-gram ending at the newest token occurs
``repeats`` times (itself included), without overlapping, among the last ``window`` generated
tokens. Requiring more than one earlier occurrence keeps legitimately repeated structure (e.g. two
identical table rows) going; not counting overlapping occurrences keeps runs of one character
going (a table of contents' dot leaders, ``____`` form fields and ``----`` rules are read one
character per token by character-level models such as ``compact``): a run of one token trips the
detector only at ``n x repeats`` tokens, not at ``n + repeats - 1``.
"""

from __future__ import annotations

from collections import deque


class NGramLoopDetector:
    """Incremental detector over generated token ids; O(n + occurrences) work per token.

    ``n``: n-gram length (tokens, >= 1); ``window``: generated tokens inspected (>= n * repeats);
    ``repeats``: non-overlapping occurrences of one n-gram inside the window that count as a loop
    (>= 2). Raises ValueError for other values.
    """

    def __init__(self, n: int, window: int, repeats: int = 3):
        if n < 1 or repeats < 2 or window < n * repeats:
            raise ValueError(f"need n >= 1, repeats >= 2 and window >= n * repeats, "
                             f"got n={n}, window={window}, repeats={repeats}")
        self.n, self.window, self.repeats = n, window, repeats
        self._tokens: deque[int] = deque()
        self._pushed = 0  # tokens pushed so far; the newest token's position is _pushed - 1
        self._starts: dict[tuple[int, ...], deque[int]] = {}  # n-gram -> its start positions in the window

    def push(self, token_id: int) -> bool:
        """Add the newest generated token; True when the sequence is looping."""
        toks = self._tokens
        toks.append(token_id)
        self._pushed += 1
        if len(toks) > self.window:
            # The oldest n-gram (starting at the token leaving the window) leaves the window.
            old = tuple(toks[i] for i in range(self.n))
            starts = self._starts.get(old)
            if starts:
                starts.popleft()
                if not starts:
                    del self._starts[old]
            toks.popleft()
        if len(toks) < self.n:
            return False
        gram = tuple(toks[i] for i in range(len(toks) - self.n, len(toks)))
        starts = self._starts.setdefault(gram, deque())
        starts.append(self._pushed - self.n)
        if len(starts) < self.repeats:
            return False
        # Occurrences that do not overlap, counted back from the newest one.
        count, limit = 0, None
        for pos in reversed(starts):
            if limit is None or pos + self.n <= limit:
                count, limit = count + 1, pos
                if count >= self.repeats:
                    return True
        return False
