"""Character vocabulary and the ``tokenizers`` tokenizer of the compact model.

The model reads printed Latin-script text, so the vocabulary is character level: printable ASCII,
the Latin-1 supplement letters and signs, and typographic punctuation / symbols common in printed
documents (dashes, curly quotes, bullets, euro sign, a few Greek letters used in papers). Text is
NFC-normalised (Unicode Standard Annex #15) before tokenisation, so decomposed accents
(``e`` + U+0301) become one token.

Ids 0-4 are special: ``<pad>``, ``<s>`` (start of the text after the vision tokens), ``</s>``
(end of line), ``<unk>``, ``<image>`` (vision-token placeholder in prompts).
"""

from __future__ import annotations

import pathlib
import unicodedata

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

PAD, BOS, EOS, UNK, IMAGE = "<pad>", "<s>", "</s>", "<unk>", "<image>"
SPECIALS = [PAD, BOS, EOS, UNK, IMAGE]
PAD_ID, BOS_ID, EOS_ID, UNK_ID, IMAGE_ID = range(5)
SPACE_ID = len(SPECIALS)  # " " is the first character of CHARSET (and of the Chinese charset built on it)

_ASCII = [chr(c) for c in range(32, 127)]
# Latin-1 supplement without NBSP (U+00A0) and soft hyphen (U+00AD), which print as space / nothing.
_LATIN1 = [chr(c) for c in range(0xA1, 0x100) if c != 0xAD]
_EXTRA = list(
    "–—‘’‚“”„•…€™†‡‰′″−∗■□●○→←≤≥≠≈∞√∑∫ŒœŠšŽžŸŁłıαβγδεθλμπρστφχψωΔΣΩ"
)
CHARSET: list[str] = list(dict.fromkeys(_ASCII + _LATIN1 + _EXTRA))


def normalize_text(text: str) -> str:
    """NFC-normalise ``text`` and map characters the vocabulary spells differently.

    NBSP -> space, soft hyphen dropped, ligatures (U+FB00..FB04) expanded, tabs -> space.
    """
    text = unicodedata.normalize("NFC", text)
    table = {"\u00a0": " ", "\u00ad": "", "\t": " ", "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl",
             "\ufb03": "ffi", "\ufb04": "ffl", "\u2010": "-", "\u2011": "-", "\u2212": "−"}
    return "".join(table.get(c, c) for c in text)


def build_tokenizer(charset: list[str] | None = None) -> Tokenizer:
    """A character-level ``tokenizers.Tokenizer``: WordLevel model over ``charset`` (default
    :data:`CHARSET`; :data:`models.compact.vocab_zh.ZH_CHARSET` for the Chinese checkpoint, which
    keeps :data:`CHARSET`'s ids), every character its own pre-token (regex ``.``), NFC normaliser,
    ``Fuse`` decoder (no spaces added). Vocabulary size = 5 specials + ``len(charset)``.
    """
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in CHARSET if charset is None else charset:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIALS)
    return tok


def load_tokenizer(checkpoint_dir: str | pathlib.Path) -> Tokenizer:
    """Load ``tokenizer.json`` of a checkpoint directory (raises FileNotFoundError if missing)."""
    path = pathlib.Path(checkpoint_dir) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    return Tokenizer.from_file(str(path))


def encode(tok: Tokenizer, text: str) -> list[int]:
    """Text -> ids without specials (characters outside the vocabulary become ``<unk>``)."""
    return tok.encode(normalize_text(text), add_special_tokens=False).ids


def decode(tok: Tokenizer, ids: list[int]) -> str:
    """Ids -> text, special tokens skipped."""
    return tok.decode([i for i in ids if i >= len(SPECIALS)], skip_special_tokens=True)
