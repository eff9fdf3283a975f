"""Incremental detokenisation that only ever emits whole UTF-8 characters.

Byte-level BPE tokenizers split multi-byte characters (CJK, accents, emoji) across tokens; decoding a
prefix then ends in U+FFFD (the replacement character). Following the method of Hugging Face's
``TextStreamer`` and vLLM's ``detokenize_incrementally``, each step decodes a short window of recent
tokens twice (with and without the new tokens) and emits the difference, holding text back while it
ends in U+FFFD. Work per step is bounded by the window, not by the sequence length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text deltas.

    ``decode``: token ids -> text (the decoder half's ``decode_text``). Call :meth:`push` with the
    new ids of each step and :meth:`flush` at the end; the concatenation of all deltas equals
    ``decode(all_ids)`` whenever the tokenizer decodes prefixes consistently.
    """

    def __init__(self, decode: Callable[[list[int]], str]):
        self._decode = decode
        self._ids: list[int] = []
        self._prefix_offset = 0  # start of the context window re-decoded each step
        self._read_offset = 0  # ids up to here have been emitted as text

    def push(self, new_ids: Sequence[int]) -> str:
        """Add generated ids; return the newly completed text (may be empty)."""
        self._ids.extend(int(i) for i in new_ids)
        prefix = self._decode(self._ids[self._prefix_offset:self._read_offset])
        full = self._decode(self._ids[self._prefix_offset:])
        if len(full) <= len(prefix) or full.endswith(_REPLACEMENT) or not full.startswith(prefix):
            return ""  # incomplete character (or a merge that rewrites the prefix): hold back
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return full[len(prefix):]

    def flush(self) -> str:
        """Text of any held-back ids (an incomplete character becomes U+FFFD)."""
        prefix = self._decode(self._ids[self._prefix_offset:self._read_offset])
        full = self._decode(self._ids[self._prefix_offset:])
        self._prefix_offset = self._read_offset = len(self._ids)
        return full[len(prefix):] if full.startswith(prefix) else ""
