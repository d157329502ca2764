from __future__ import annotations

from typing import Any

import pytest

from evidence.extract import ExtractionError, decode, extract

from .conftest import article, make_pdf

PARAS = [
    "Measles is a highly contagious viral disease that spreads through the air when an infected person coughs or sneezes.",
    "Two doses of the measles, mumps and rubella vaccine are about 97 percent effective at preventing measles infection.",
    "Before vaccination became widespread, measles caused an estimated 2.6 million deaths each year around the world.",
    "Health authorities recommend the first dose at 12 to 15 months of age and the second dose at four to six years.",
]


def test_it_extracts_main_text_title_and_date() -> None:
    html = article(
        PARAS,
        title="Measles vaccine facts",
        extra_head='<meta property="article:published_time" content="2023-05-04T10:00:00Z">',
    )
    result = extract(html.encode(), "text/html")
    assert "97 percent effective" in result.text
    assert "Copyright 2024" not in result.text
    assert result.title == "Measles vaccine facts"
    assert result.published == "2023-05-04"
    assert result.kind == "html"


REFERENCES = [
    "Moro PL, Arana J, Cano M. Deaths Reported to the Vaccine Adverse Event Reporting System. Clin Infect Dis. 2015;61(6):980-7.",
    "Classification and diagnosis of diabetes. Diabetes Care. 2022; doi:10.2337/dc22-S002.",
]


@pytest.mark.parametrize(
    "wrapper",
    [
        '<div class="references"><h2>References</h2><ul>{}</ul></div>',  # Mayo
        '<ol class="c-article-references">{}</ol>',  # Springer
        '<section id="Bibliography"><ol>{}</ol></section>',
        '<div class="page-content-sources__body"><ul class="page_sources">{}</ul></div>',  # CDC
        '<div class="footnotes"><ol>{}</ol></div>',
    ],
)
def test_it_drops_reference_lists_the_markup_names(wrapper: str) -> None:
    items = "".join(f"<li>{ref}</li>" for ref in REFERENCES)
    html = article(PARAS).replace("</article>", wrapper.format(items) + "</article>")
    text = extract(html.encode(), "text/html").text
    assert "97 percent effective" in text
    assert "Clin Infect Dis" not in text and "doi:10.2337" not in text


def test_it_keeps_the_prose_of_real_pages_and_drops_their_reference_lists(shared_data: Any) -> None:
    pages = shared_data / "webpages" / "health"
    sids = extract((pages / "cdc.gov__about-sids.html").read_bytes(), "text/html").text
    assert "healthy babies be placed on their backs to sleep" in sids
    assert "Moro PL" not in sids
    mayo = extract((pages / "mayoclinic.org__symptoms-causes-syc-20371444.html").read_bytes(), "text/html").text
    assert "Type 1 diabetes can start at any age." in mayo
    assert "doi:10.2337" not in mayo


def test_it_reports_pages_without_main_text() -> None:
    html = "<html><head><title>Home</title></head><body><nav><a href='/a'>A</a><a href='/b'>B</a></nav><div></div></body></html>"
    with pytest.raises(ExtractionError) as info:
        extract(html.encode(), "text/html")
    assert info.value.error_code == "empty_text"


@pytest.mark.parametrize(
    "html",
    [
        "<html><head><title>Attention Required! | Cloudflare</title></head><body><h1>Sorry, you have been blocked</h1><p>Please complete the security check to access this site.</p><div class='cf-chl-widget'></div></body></html>",
        "<html><head><script src='/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e6fffd425f7e032f3'></script></head><body></body></html>",
        "<html><body><h1>Before you continue</h1><p>We use cookies and data to deliver and maintain our services. If you choose to Accept all, we will also use cookies for personalised ads. Select Reject all to decline. Manage privacy settings.</p><button>Reject all</button><button>Accept all</button></body></html>",
        "<html><body><h2>Are you a robot?</h2><p>Our systems have detected unusual traffic from your computer network. Please solve the captcha below.</p><div class='g-recaptcha'></div></body></html>",
    ],
)
def test_it_detects_block_consent_and_captcha_pages(html: str) -> None:
    with pytest.raises(ExtractionError) as info:
        extract(html.encode(), "text/html")
    assert info.value.error_code == "block_page"


def test_it_keeps_real_articles_that_mention_cookies() -> None:
    paras = [
        *PARAS,
        "This site uses cookies; see our cookie policy. You can accept all or reject all in the settings.",
    ] * 3
    assert extract(article(paras).encode(), "text/html").n_words > 100


def test_it_extracts_pdf_text_and_metadata() -> None:
    pdf = make_pdf(PARAS, title="WHO measles fact sheet")
    result = extract(pdf, "application/pdf")
    assert "97 percent effective" in result.text
    assert result.title == "WHO measles fact sheet"
    assert result.published == "2024-03-15"
    assert result.kind == "pdf"


def test_it_reports_broken_pdfs() -> None:
    with pytest.raises(ExtractionError) as info:
        extract(b"%PDF-1.4\n garbage without objects", "application/pdf")
    assert info.value.error_code in ("bad_pdf", "empty_text")


RUSSIAN = "Корь - очень заразное вирусное заболевание, вакцина эффективна на девяносто семь процентов."
JAPANESE = "麻疹は非常に感染力の強いウイルス性疾患です。ワクチンは二回の接種で高い効果があります。"
CHINESE = "麻疹是一种传染性很强的病毒性疾病。接种两剂疫苗可以有效预防麻疹感染，保护儿童健康。"


@pytest.mark.parametrize(
    ("text", "encoding", "header", "meta"),
    [
        (RUSSIAN, "windows-1251", "windows-1251", None),
        (RUSSIAN, "koi8-r", None, "koi8-r"),
        (JAPANESE, "shift_jis", None, "Shift_JIS"),
        (JAPANESE, "euc-jp", "EUC-JP", None),
        (CHINESE, "gb18030", "gb2312", None),
        ("Café crème brûlée, naïve façade — déjà vu.", "cp1252", "iso-8859-1", None),
    ],
)
def test_it_decodes_declared_non_utf8_pages(text: str, encoding: str, header: str | None, meta: str | None) -> None:
    head = f'<meta charset="{meta}">' if meta else ""
    html = f"<html><head>{head}<title>t</title></head><body><p>{text}</p></body></html>"
    decoded, _used = decode(html.encode(encoding), header)
    assert text in decoded


def test_it_prefers_utf8_when_a_single_byte_declaration_is_wrong() -> None:
    html = f"<html><head><meta charset='iso-8859-1'></head><body><p>{RUSSIAN} Café</p></body></html>"
    decoded, used = decode(html.encode("utf-8"), None)
    assert RUSSIAN in decoded
    assert used == "utf-8"


def test_it_sniffs_undeclared_legacy_encodings() -> None:
    html = "<html><body>" + f"<p>{RUSSIAN}</p>" * 5 + "</body></html>"
    decoded, _used = decode(html.encode("windows-1251"), None)
    assert RUSSIAN in decoded


def test_it_extracts_non_utf8_page_end_to_end() -> None:
    paras = [
        RUSSIAN,
        "Прививка защищает детей и взрослых от тяжелых осложнений кори, включая пневмонию и энцефалит.",
    ] * 4
    html = article(paras, title="Корь").encode("windows-1251")
    result = extract(html, "text/html", charset="windows-1251")
    assert "девяносто семь" in result.text
    assert result.encoding == "cp1251"


def test_mojibake_in_the_page_text_is_repaired() -> None:
    from evidence.extract import extract

    sentence = "There\u2019s no evidence that vitamin C prevents the flu, trials found \u2014 in adults. "
    broken = sentence.encode("utf-8").decode("cp1252")  # "Thereâ€™s …": a page encoded twice
    assert "â€™" in broken
    body = f"<html><body><article><p>{broken * 6}</p></article></body></html>".encode()
    text = extract(body, "text/html", charset="utf-8").text
    assert "There\u2019s no evidence" in text and "â€" not in text
    assert "\u2014" in text  # the page's own dash and curly quote are kept as written
