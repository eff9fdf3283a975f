"""Which installed font PDFium draws a PDF's non-embedded text with: never a slanted face for upright text.

A PDF may name a font without embedding it (typewritten legal transcripts: ``CourierNewPSMT``;
``pdffonts`` says ``emb no``). PDFium then asks the platform's font info for a substitute, and on
Linux that is its ``CFX_FolderFontInfo``: it scans the font folders, keys every face by the family
(name ID 1) and style (name ID 2) of its ``name`` table, keeps the first file it reads for a key,
and picks by name and that style. A font package whose ``name`` table mislabels its faces defeats
it: Debian's ``fonts-courier-prime`` says "Regular" in all four files, so ``Courier Prime Italic.otf``
(read first) becomes "Courier Prime", the best match for ``Courier``, and the whole page is drawn in
italic, which the model reads worse ("UNITED" read "UNITHED", ``samples/scotus_p01.pdf``).

:func:`install_upright_fonts` wraps PDFium's own font info (``FPDF_GetDefaultSystemFontInfo``) in
:class:`UprightFontInfo`, whose ``MapFont`` keeps every answer except one: an upright request
(``bItalic`` 0) answered with a face whose own tables say it is slanted (``post.italicAngle``,
``OS/2.fsSelection`` bit 0 or ``head.macStyle`` bit 1; the tables, not the name, decide). That face
is replaced by the first upright installed face of :data:`UPRIGHT_FACES` for the request's pitch
family (fixed pitch: Nimbus Mono PS, URW's Courier, then Liberation Mono, ...),
or, when none is installed, by nothing: PDFium then draws with its own built-in standard font
(Foxit's, upright). Italic requests keep their italic faces.
"""

from __future__ import annotations

import ctypes
import logging
import struct
import threading
from typing import Any

import pypdfium2 as pdfium

log = logging.getLogger("inkstream.pdf_fonts")

#: PDFium's ``pitch_family`` bits (``FXFONT_FF_*``, ``core/fxge/fx_font.h``)
FF_FIXEDPITCH = 1
FF_ROMAN = 1 << 4

#: Upright faces tried in order, by the family kind PDFium asks for, under the face names PDFium's
#: folder font info gives them (family, plus the style unless "Regular"; " Bold" first for a bold
#: request). URW's clones of the PDF standard fonts first (the same designs as Courier, Times,
#: Helvetica), then metric-compatible ones. Measured on 12 seeded typewritten pages in non-embedded
#: Courier New, CER: Nimbus Mono PS 0.47 %, Liberation Mono about twice that (its narrow glyphs in
#: wide cells get words split: "abor ts").
UPRIGHT_FACES: dict[str, tuple[str, ...]] = {
    "fixed": ("Nimbus Mono PS", "Liberation Mono", "Cousine", "FreeMono", "DejaVu Sans Mono"),
    "serif": ("Nimbus Roman", "Liberation Serif", "Tinos", "FreeSerif", "DejaVu Serif"),
    "sans": ("Nimbus Sans", "Liberation Sans", "Arimo", "FreeSans", "DejaVu Sans"),
}

#: Slant, in degrees, below which ``post.italicAngle`` counts as upright (rounding noise in fonts).
UPRIGHT_MAX_ANGLE_DEG = 0.5

#: PDFium's ``FX_Charset`` values the :data:`UPRIGHT_FACES` cover (ANSI, default); a request in
#: another script (CJK, symbol) keeps PDFium's face, slanted or not: better than one without its glyphs.
_LATIN_CHARSETS = (0, 1)

_TAG_POST = 0x706F7374  # 'post'
_TAG_OS2 = 0x4F532F32   # 'OS/2'
_TAG_HEAD = 0x68656164  # 'head'


def family_kind(pitch_family: int) -> str:
    """``"fixed"``, ``"serif"`` or ``"sans"``: the :data:`UPRIGHT_FACES` list for PDFium's ``pitch_family``."""
    if pitch_family & FF_FIXEDPITCH:
        return "fixed"
    return "serif" if pitch_family & FF_ROMAN else "sans"


def slanted_by_tables(post: bytes, os2: bytes, head: bytes) -> bool:
    """Whether a face's own tables say it is italic or oblique: ``post.italicAngle`` (16.16 fixed,
    degrees) beyond :data:`UPRIGHT_MAX_ANGLE_DEG`, ``OS/2.fsSelection`` ITALIC bit, or
    ``head.macStyle`` italic bit. A missing or short table (``b""``) says nothing.
    """
    if len(post) >= 8 and abs(struct.unpack_from(">i", post, 4)[0] / 65536.0) > UPRIGHT_MAX_ANGLE_DEG:
        return True
    if len(os2) >= 64 and struct.unpack_from(">H", os2, 62)[0] & 1:
        return True
    return len(head) >= 46 and bool(struct.unpack_from(">H", head, 44)[0] & 2)


class UprightFontInfo(pdfium.PdfSysfontBase):
    """PDFium's default system font info, except that an upright request never gets a slanted face
    (module docstring). Every other callback is PDFium's own. Callbacks run on the thread that
    renders; an error inside one is logged and PDFium's own answer is kept.

    Constructor argument ``default``: the font info wrapped (``None``: PDFium's platform default,
    ``FPDF_GetDefaultSystemFontInfo``; raises ``pypdfium2.PdfiumError`` where the platform has none),
    or any object with ``FPDF_SYSFONTINFO``'s callbacks and ``version``.
    """

    def _table(self, handle: Any, tag: int) -> bytes:
        size = self.default.GetFontData(self.default, handle, tag, None, 0)
        if not size or size > 1 << 20:
            return b""
        buf = (ctypes.c_ubyte * size)()
        got = self.default.GetFontData(self.default, handle, tag, buf, size)
        return bytes(buf)[:got] if got == size else b""

    def _is_slanted(self, handle: Any) -> bool:
        return slanted_by_tables(self._table(handle, _TAG_POST), self._table(handle, _TAG_OS2),
                                 self._table(handle, _TAG_HEAD))

    def _upright_substitute(self, weight: int, pitch_family: int) -> Any:
        for family in UPRIGHT_FACES[family_kind(pitch_family)]:
            styles = (" Bold", "", " Book") if weight > 500 else ("", " Book")  # DejaVu's regular is "Book"
            for name in (family + style for style in styles):
                handle = self.default.GetFont(self.default, name.encode())
                if handle:
                    if not self._is_slanted(handle):
                        return handle
                    self.default.DeleteFont(self.default, handle)
        return None

    def MapFont(self, _: Any, weight: int, italic: int, charset: int, pitch_family: int,
                face: Any, exact: Any) -> Any:
        """``FPDF_SYSFONTINFO.MapFont``: a face handle for the request (weight 100-900, italic 0/1,
        ``FX_Charset``, ``FXFONT_FF_*`` pitch family, face name as C string; ``exact`` ignored by PDFium),
        or None (PDFium then uses its built-in fonts). PDFium's own answer unless it is a slanted face for
        an upright Latin request (class docstring).
        """
        handle = self.default.MapFont(self.default, weight, italic, charset, pitch_family, face, exact)
        if not handle or italic or charset not in _LATIN_CHARSETS:
            return handle
        try:  # never fail PDFium's font lookup from a callback
            if not self._is_slanted(handle):
                return handle
        except Exception:
            log.exception("PDF fonts: slant check failed; PDFium's own choice is kept")
            return handle
        self.default.DeleteFont(self.default, handle)
        try:
            substitute = self._upright_substitute(weight, pitch_family)
        except Exception:
            log.exception("PDF fonts: no upright substitute looked up; PDFium's built-in font is used")
            substitute = None
        log.debug("PDF fonts: upright %r was mapped to a slanted face; %s instead",
                  ctypes.cast(face, ctypes.c_char_p).value,
                  "an installed upright face" if substitute else "PDFium's built-in font")
        return substitute


_lock = threading.Lock()
_installed: UprightFontInfo | None = None
_tried = False


def install_upright_fonts() -> bool:
    """Install :class:`UprightFontInfo` as PDFium's system font info, once per process; later calls,
    from any thread, return at once. Call it on the thread that runs PDFium (the gateway's
    ``PDFIUM_EXECUTOR``: installing is then serialised with rendering) before PDFium loads a page
    (a loaded page keeps the faces mapped for it). Returns whether it is installed; False where
    PDFium has no default font info to wrap (PDFium's own substitution then stays; logged once).
    """
    global _installed, _tried
    if _tried:
        return _installed is not None
    with _lock:
        if not _tried:
            try:
                info = UprightFontInfo()
                info.setup()
                _installed = info
            except pdfium.PdfiumError as exc:
                log.warning("PDF fonts: PDFium's default font substitution kept (%s)", exc)
            _tried = True
    return _installed is not None
