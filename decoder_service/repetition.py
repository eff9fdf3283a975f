"""N-gram loop detector: stops a sequence that has started repeating itself.

OCR decoders on real pages fall into loops (the same line or table row again and again until
``max_new_tokens``); vendors report 3-6 % of production pages (DESIGN.md). DeepSeek-OCR's own
serving recipe bans repeated 30-grams within a 90-token window (vLLM ``NoRepeatNGramLogitsProcessor``,
``ngram_size=30, window_size=90``); a serving system should rather *stop* and report the loop than
silently steer the text, so this detector fires when the n-gram ending at the newest token occurs
``repeats`` times (itself included) among the last ``window`` generated tokens. Requiring more than
one earlier occurrence keeps legitimately repeated structure (e.g. two identical table rows) going.
"""

from __future__ import annotations

from collections import Counter, deque


class NGramLoopDetector:
    """Incremental detector over generated token ids; O(n) work per token.

    ``n``: n-gram length (tokens, >= 1); ``window``: generated tokens inspected (>= n * repeats);
    ``repeats``: occurrences of one n-gram inside the window that count as a loop (>= 2).
    """

    def __init__(self, n: int, window: int, repeats: int = 3):
        if n < 1 or repeats < 2 or window < n * repeats:
            raise ValueError(f"need n >= 1, repeats >= 2 and window >= n * repeats, got n={n}, window={window}, repeats={repeats}")
        self.n, self.window, self.repeats = n, window, repeats
        self._tokens: deque[int] = deque()
        self._counts: Counter[tuple[int, ...]] = Counter()

    def push(self, token_id: int) -> bool:
        """Add the newest generated token; True when the sequence is looping."""
        toks = self._tokens
        toks.append(token_id)
        if len(toks) > self.window:
            # The oldest n-gram (starting at the token leaving the window) leaves the window.
            old = tuple(toks[i] for i in range(self.n))
            self._counts[old] -= 1
            if self._counts[old] <= 0:
                del self._counts[old]
            toks.popleft()
        if len(toks) < self.n:
            return False
        gram = tuple(toks[i] for i in range(len(toks) - self.n, len(toks)))
        self._counts[gram] += 1
        return self._counts[gram] >= self.repeats
