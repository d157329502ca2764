from __future__ import annotations

from crowdnotes_site.lib.text_rules import (
    NOTE_MAX_CHARS,
    find_urls,
    fits_length,
    note_length,
    strip_urls,
    truncate_for_helpfulness,
)


def test_it_counts_each_url_as_one_character() -> None:
    url = "https://www.cdc.gov/vaccinesafety/concerns/autism.html"
    assert note_length(f"See {url}") == len("See ") + 1
    assert note_length("Plain text", [url, "https://who.int/x"]) == len("Plain text") + 2


def test_it_counts_an_inline_url_once_even_if_attached() -> None:
    url = "https://nih.gov/a"
    assert note_length(f"Text {url}", [url]) == len("Text ") + 1


def test_it_keeps_trailing_punctuation_out_of_urls() -> None:
    assert find_urls("Read https://who.int/fact. Then www.cdc.gov, ok") == [
        "https://who.int/fact",
        "www.cdc.gov",
    ]
    assert strip_urls("Read https://who.int/fact. Then more") == "Read . Then more"


def test_it_checks_the_280_rule() -> None:
    assert fits_length("a" * 278, ["https://a.org/1", "https://b.org/2"])
    assert not fits_length("a" * 279, ["https://a.org/1", "https://b.org/2"])


def test_it_leaves_a_short_note_untouched_apart_from_urls() -> None:
    judged = truncate_for_helpfulness("Short note https://x.org/a here", ["https://y.org/b"])
    assert judged.text == "Short note here"
    assert judged.urls == ("https://x.org/a", "https://y.org/b")
    assert not judged.truncated


def test_it_truncates_so_text_plus_urls_fits() -> None:
    urls = ["https://a.org/1", "https://b.org/2", "https://c.org/3"]
    judged = truncate_for_helpfulness("word " * 100, urls)
    assert judged.truncated
    assert len(judged.text) <= NOTE_MAX_CHARS - 3
    assert note_length(judged.text, urls) <= NOTE_MAX_CHARS
    assert "http" not in judged.text


def test_it_counts_invisible_text_as_blank() -> None:
    from crowdnotes_site.lib.text_rules import is_blank

    invisible = "\u200b \u200c\u200d\u2060\ufeff\u202e\u2066\u00ad\n\t\u00a0"
    assert is_blank(invisible)
    assert is_blank("")
    assert not is_blank("\u200bx\u200b")
    assert not is_blank("\u202eevil")
