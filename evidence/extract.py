"""Main-text extraction from fetched HTML, plain text and PDF (pure: no ORM, no network)."""

from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass
from typing import Any

import ftfy

from evidence.errors import ExtractionError
from evidence.fetch import HTML, PDF, TEXT

log = logging.getLogger(__name__)
# pypdf logs a warning per font it cannot fully parse; the text still comes out.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# Single-byte charsets decode any byte sequence, so a wrong declaration never fails loudly.
_SINGLE_BYTE = re.compile(r"^(iso-?8859-\d+|latin-?\d|windows-125\d|cp125\d|us-ascii|ascii|koi8-[ru])$")
# WHATWG label aliases: what browsers really decode these declarations as.
_ALIASES = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "big5": "big5hkscs",
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE)
_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

# Signatures of anti-bot interstitials and consent walls (in the raw HTML or the extracted text).
_BLOCK_STRONG = re.compile(
    r"_Incapsula_Resource|Incapsula incident ID|cf-chl-|challenges\.cloudflare\.com|cf_chl_opt|"
    r"px-captcha|captcha-delivery\.com|geo\.captcha-delivery|"
    r"Request unsuccessful\. Incapsula|Attention Required! \| Cloudflare|Just a moment\.\.\.|"
    r"verify (that )?you are (a )?human|are you a robot|unusual traffic from your computer|"
    r"Access to this page has been denied|Pardon Our Interruption|Please enable JS and disable any ad blocker",
    re.IGNORECASE,
)
_BLOCK_WEAK = re.compile(
    r"captcha|g-recaptcha|access denied|checking your browser|enable (javascript|cookies)|bot detection|"
    r"we use cookies|cookie (policy|settings|preferences)|consent|accept (all|cookies)|reject all|"
    r"manage (your )?(privacy|cookie)|before you continue|privacy choices|subscribe to continue|"
    r"your browser is not supported|403 forbidden",
    re.IGNORECASE,
)


@dataclass
class Extracted:
    text: str
    title: str | None
    published: str | None  # ISO date (YYYY-MM-DD) when the page states one
    encoding: str | None
    kind: str  # html, text or pdf
    n_words: int


def count_words(text: str) -> int:
    # CJK scripts have no spaces: count characters there, roughly what a visible-word estimate does.
    return len(_WORD.findall(_CJK.sub(" ", text))) + len(_CJK.findall(text))


def _normalize(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().lower()
    label = _ALIASES.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _try(body: bytes, encoding: str | None, tolerance: float = 0.0) -> str | None:
    if not encoding:
        return None
    try:
        return body.decode(encoding)
    except UnicodeDecodeError:
        if tolerance <= 0:
            return None
    text = body.decode(encoding, errors="replace")
    return text if text.count("\ufffd") <= tolerance * max(1, len(text)) else None


def decode(body: bytes, declared: str | None) -> tuple[str, str]:
    """Decode bytes to text: BOM, then header and <meta> charsets checked against the bytes, then sniffing."""
    for bom, name in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if body.startswith(bom):
            return body.decode(name, errors="replace"), name
    meta = _META_CHARSET.search(body[:8192])
    candidates = [_normalize(declared), _normalize(meta.group(1).decode("ascii", "ignore") if meta else None)]
    utf8 = _try(body, "utf-8")
    is_ascii = body.isascii()
    for encoding in candidates:
        if not encoding:
            continue
        # A single-byte declaration over bytes that are valid multi-byte UTF-8 is a wrong declaration.
        if utf8 is not None and not is_ascii and _SINGLE_BYTE.match(encoding.replace("_", "-")):
            return utf8, "utf-8"
        text = _try(body, encoding, tolerance=0.002)
        if text is not None:
            return text, encoding
    if utf8 is not None:
        return utf8, "utf-8"
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    if best is not None and best.encoding:
        return body.decode(best.encoding, errors="replace"), best.encoding
    return body.decode("cp1252", errors="replace"), "cp1252"


def _block_reason(raw: str, text: str, n_words: int) -> str | None:
    if n_words < 400:
        strong = _BLOCK_STRONG.search(raw[:300_000])
        if strong:
            return f"anti-bot page ({strong.group(0)[:40]})"
    if n_words < 120:
        weak = {m.group(0).lower() for m in _BLOCK_WEAK.finditer(text)}
        if len(weak) >= 2 or (weak and n_words < 40):
            return f"consent or block page ({', '.join(sorted(weak))[:60]})"
    return None


def _xpath_has(token: str) -> str:
    lower = "translate({},'ABCDEFGHIJKLMNOPQRSTUVWXYZ','abcdefghijklmnopqrstuvwxyz')"
    return f"contains({lower.format('@class')},'{token}') or contains({lower.format('@id')},'{token}')"


# Reference lists, bibliographies, footnotes and "sources" boxes are pointers to evidence, not
# evidence, and their keyword density makes them win embedding matches (Mayo's diabetes page
# showed "Diabetes Care. 2022; doi:..."). trafilatura drops elements matching these before it
# extracts: the class/id names the corpus' publishers use (Mayo "references", Springer
# "c-article-references", ACP "article__references", CDC "page_sources", Wikipedia "reflist"
# "references", footnotes). Tables stay: state COVID bulletins give their case counts in tables.
# What the markup does not mark (PDF reference sections) is demoted by evidence.prose instead.
_PRUNE_TOKENS = (
    "references",
    "referencelist",
    "reference-list",
    "bibliograph",
    "footnotes",
    "page_sources",
    "page-sources",
    "content-sources",
)
PRUNE_XPATH = ["//*[" + " or ".join(_xpath_has(token) for token in _PRUNE_TOKENS) + "]"]


def _extract_html(html: str) -> tuple[str, str | None, str | None]:
    import trafilatura

    doc: Any = trafilatura.bare_extraction(
        html,
        with_metadata=True,
        include_comments=False,
        include_tables=True,
        deduplicate=False,
        prune_xpath=PRUNE_XPATH,
    )
    text = (doc.text if doc is not None else None) or ""
    if count_words(text) < 80:
        # Short result: retry favouring recall, then trafilatura's own baseline extractor.
        recall: Any = trafilatura.bare_extraction(
            html, favor_recall=True, include_comments=False, with_metadata=False, prune_xpath=PRUNE_XPATH
        )
        recall_text = (recall.text if recall is not None else None) or ""
        if count_words(recall_text) > count_words(text):
            text = recall_text
        if count_words(text) < 25:
            _, baseline_text, _ = trafilatura.baseline(html)
            if count_words(baseline_text) > count_words(text):
                text = baseline_text
    title = doc.title if doc is not None else None
    published = doc.date if doc is not None else None
    if not title:
        match = re.search(r"<title[^>]*>(.*?)</title>", html[:200_000], re.IGNORECASE | re.DOTALL)
        title = re.sub(r"\s+", " ", match.group(1)).strip() if match else None
    return text, title or None, published or None


def _extract_pdf(body: bytes, max_pages: int) -> tuple[str, str | None, str | None]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body))
        if reader.is_encrypted:
            reader.decrypt("")
        pages = [page.extract_text() or "" for page in reader.pages[:max_pages]]
        meta = reader.metadata
    except (PdfReadError, ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise ExtractionError("bad_pdf", f"cannot read PDF: {exc}") from exc
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    title = None
    published = None
    if meta is not None:
        title = (meta.title or "").strip() or None
        try:
            created = meta.creation_date
        except (ValueError, TypeError):
            created = None
        published = created.date().isoformat() if created else None
    return text, title, published


def extract(
    body: bytes, content_type: str, *, charset: str | None = None, min_words: int = 25, max_pdf_pages: int = 300
) -> Extracted:
    """Main text, title and date of a fetched document, or ExtractionError(empty_text | block_page | bad_pdf)."""
    raw = ""
    encoding: str | None = None
    if content_type == PDF:
        text, title, published = _extract_pdf(body, max_pdf_pages)
        kind = "pdf"
    elif content_type == HTML:
        raw, encoding = decode(body, charset)
        text, title, published = _extract_html(raw)
        kind = "html"
    elif content_type == TEXT:
        raw, encoding = decode(body, charset)
        text, title, published, kind = raw, None, None, "text"
    else:
        raise ExtractionError("unsupported_type", f"cannot extract {content_type!r}")
    # Mojibake from a page encoded twice ("thereâ\x80\x99s" for "there's"): ftfy's fix_encoding
    # repairs only that, leaving quotes, dashes and the rest of the text as the page wrote them.
    text, title = ftfy.fix_encoding(text), ftfy.fix_encoding(title) if title else title
    text = re.sub(r"[ \t\u00a0]+", " ", text.replace("\r\n", "\n")).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    n_words = count_words(text)
    reason = _block_reason(raw, text, n_words) if kind != "pdf" else None
    if reason:
        raise ExtractionError("block_page", reason)
    if n_words < min_words:
        raise ExtractionError("empty_text", f"only {n_words} words of main text")
    return Extracted(text=text, title=title, published=published, encoding=encoding, kind=kind, n_words=n_words)
