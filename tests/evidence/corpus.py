"""A small evidence corpus on disk (HTML pages with publication dates and a manifest); the
`corpus` fixture is registered in tests/evidence/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

MEASLES_PAGE = [
    "Measles is a highly contagious viral disease that spreads through the air when an infected person coughs.",
    "Two doses of the measles, mumps and rubella (MMR) vaccine are about 97 percent effective at preventing measles.",
    "The MMR vaccine does not cause autism: large studies of hundreds of thousands of children found no link.",
]
DOCS = {
    # name: (url, title, date or None, paragraphs)
    "who-measles.html": ("https://www.who.int/news-room/fact-sheets/detail/measles", "Measles fact sheet", "2019-05-01", MEASLES_PAGE),
    "volcano.html": ("https://www.volcano-news.example/eruption", "Volcano eruption disrupts flights", "2018-03-02", [
        "Volcanic ash clouds can disrupt air travel for days, and lava flows destroy roads and farmland.",
        "Airlines cancelled hundreds of flights as the ash cloud drifted south over the islands.",
        "Residents near the slopes were evacuated while scientists measured sulphur dioxide emissions."]),
    "bread.html": ("https://bread.example/sourdough", "Sourdough basics", "2017-07-07", [
        "Sourdough bread needs an active starter, a long cold fermentation and a very hot oven with steam.",
        "Bakers feed the starter with flour and water every day to keep the wild yeast active and sour.",
        "A Dutch oven traps steam so the crust of the loaf becomes crisp and blistered while baking."]),
    "new-measles.html": ("https://news.example/2024/measles-outbreak", "Measles outbreak news 2024", "2024-02-01", [
        "A measles outbreak in 2024 spread among unvaccinated children, health officials said this week.",
        "Officials urged parents to check that children received both doses of the MMR vaccine against measles.",
        "Measles cases rose after vaccination rates fell during the pandemic, according to the report."]),
    "undated-measles.html": ("https://undated.example/measles-myths", "Measles myths", None, [
        "Myths about measles and the MMR vaccine spread online, but the vaccine does not cause autism in children.",
        "Doctors explain that measles complications include pneumonia and encephalitis in young children.",
        "Vaccination with two doses of MMR protects almost everyone against measles for life."]),
}  # fmt: skip


def page(title: str, paragraphs: list[str], published: str | None) -> str:
    meta = f'<meta property="article:published_time" content="{published}T08:00:00+00:00">' if published else ""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f'<!doctype html><html lang="en"><head><title>{title}</title>{meta}</head><body>'
        f"<nav><a href='/'>Home</a></nav><article><h1>{title}</h1>{body}</article><footer>Footer</footer></body></html>"
    )


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    """(folder, manifest): the pages above, plus a byte-identical copy of the WHO page elsewhere."""
    folder = tmp_path / "pages"
    folder.mkdir()
    rows = ["local_file\turl\ttitle\tcategory\tlanguage\tsize_bytes"]
    for name, (url, title, published, paragraphs) in DOCS.items():
        (folder / name).write_text(page(title, paragraphs, published), encoding="utf-8")
        rows.append(f"{name}\t{url}\t{title}\tother\ten\t0")
    (folder / "copy-of-who.html").write_text((folder / "who-measles.html").read_text(), encoding="utf-8")
    rows.append("copy-of-who.html\thttps://mirror.example/who-measles\tMeasles fact sheet (mirror)\tother\ten\t0")
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder, manifest
