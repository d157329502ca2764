from __future__ import annotations

import io
from datetime import date
from pathlib import Path

from django.core.management import call_command

from evidence.index import store
from evidence.models import EvidenceSource
from tests.support.web_server import WebServer


def _index(*args: str) -> str:
    out = io.StringIO()
    call_command("index_documents", *args, stdout=out)
    return out.getvalue()


def test_it_indexes_a_folder_with_its_manifest(db: None, corpus: tuple[Path, Path]) -> None:
    folder, manifest = corpus
    out = _index(str(folder), "--manifest", str(manifest), "--base-url", "http://127.0.0.1:8001/")
    assert "indexed: 6" in out and "the index now holds 6" in out
    who = EvidenceSource.objects.get(url="https://www.who.int/news-room/fact-sheets/detail/measles")
    assert who.title == "Measles fact sheet" and who.published_at == date(2019, 5, 1)
    assert (who.domain, who.category, who.language) == ("who.int", "health_authority", "en")
    assert who.copy_url == "http://127.0.0.1:8001/who-measles.html" and who.indexed_at is not None
    assert who.passages.exists()  # the same passages snippet matching uses
    assert EvidenceSource.objects.get(url="https://undated.example/measles-myths").published_at is None
    assert "unchanged: 6" in _index(str(folder), "--manifest", str(manifest))


def test_the_full_text_index_finds_stemmed_words_and_respects_the_cutoff(db: None, corpus: tuple[Path, Path]) -> None:
    folder, manifest = corpus
    _index(str(folder), "--manifest", str(manifest))
    hits = store.search("vaccinated children measle", k=10)
    urls = [h.url for h in hits]
    assert "https://bread.example/sourdough" not in urls
    assert {
        "https://www.who.int/news-room/fact-sheets/detail/measles",
        "https://news.example/2024/measles-outbreak",
    } <= set(urls)
    assert hits[0].snippet and "measles" in hits[0].snippet.lower()
    before = store.search("measles vaccine", k=10, cutoff=date(2020, 1, 1))
    assert {h.url for h in before} == {
        "https://www.who.int/news-room/fact-sheets/detail/measles",
        "https://mirror.example/who-measles",
    }  # the 2024 page is newer, the undated one is excluded by default
    included = store.search("measles vaccine", k=10, cutoff=date(2020, 1, 1), undated="include")
    assert "https://undated.example/measles-myths" in {h.url for h in included}


def test_it_indexes_a_list_of_urls_through_the_safe_fetcher(db: None, web_server: WebServer, tmp_path: Path) -> None:
    from tests.evidence.corpus import MEASLES_PAGE, page

    target = web_server.add("/measles", page("Measles", MEASLES_PAGE, "2019-01-01"))
    moved = web_server.add("/old-measles", "", status=301, headers={"Location": "/measles"})
    listing = tmp_path / "urls.txt"
    listing.write_text(f"# evidence\n{moved}\n{web_server.url('/gone')}\n", encoding="utf-8")
    out = _index(str(listing))
    assert "indexed: 1" in out and "failed: http_error: 1" in out
    source = EvidenceSource.objects.get(url=moved)
    assert source.final_url == target and source.indexed_at is not None
