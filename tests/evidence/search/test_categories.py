from __future__ import annotations

from typing import Any

import pytest

from crowdnotes_site.lib import categories
from crowdnotes_site.lib.llm.steps.common import split_data_block
from evidence.models import DomainCategory
from evidence.services import source_category

KNOWN_DOMAINS = [
    ("https://www.cdc.gov/vaccine-safety/about/sids.html", "health_authority"),
    ("https://www.who.int/news-room/fact-sheets/detail/measles", "health_authority"),
    ("https://www.health.nsw.gov.au/news/Pages/20200501_00.aspx", "health_authority"),
    ("https://www.nhs.uk/conditions/measles/", "health_authority"),
    ("https://www.gov.pl/web/koronawirus/wykaz-zarazen-koronawirusem-sars-cov-2", "health_authority"),
    ("https://www.supremecourt.gov/", "other"),  # government, but not a health body
    ("https://pubmed.ncbi.nlm.nih.gov/12345/", "research"),  # a research host under nih.gov
    ("https://www.nih.gov/health-information", "health_authority"),
    ("https://doi.org/10.1007/s00125-024-06103-w", "research"),
    ("https://www.thelancet.com/journals/lancet/article/x", "research"),
    ("https://med.stanford.edu/news.html", "research"),
    ("https://www.ox.ac.uk/research", "research"),
    ("https://www.mayoclinic.org/diseases-conditions/diabetes", "portal"),
    ("https://www.healthline.com/nutrition/intermittent-fasting-guide", "portal"),
    ("https://www.reuters.com/article/us-health", "news"),
    ("https://www.bbc.co.uk/news/health-1", "news"),
    ("https://www.politifact.com/factchecks/2021/", "news"),
    ("https://twitter.com/someone/status/1", "social"),
    ("https://x.com/someone/status/1", "social"),
    ("https://www.youtube.com/watch?v=srtMWzyqdp8", "social"),
    ("https://someone.substack.com/p/vaccines", "social"),
    ("https://www.cancer.org/cancer.html", "advocacy"),
    ("https://www.some-charity.org/about", "advocacy"),
    ("https://www.example-shop.com/vitamins", "other"),
]


@pytest.mark.parametrize(("url", "expected"), KNOWN_DOMAINS)
def test_it_categorizes_known_domains_by_rules(url: str, expected: str) -> None:
    assert categories.category_by_rules(url).category == expected


def test_it_uses_the_registered_domain_offline() -> None:
    assert categories.registered_domain("https://www.health.nsw.gov.au/x") == ("www.health.nsw.gov.au", "nsw.gov.au")
    assert categories.registered_domain("not a url") == ("", "")


@pytest.mark.django_db
def test_the_admin_mapping_wins_over_the_rules_and_the_host_over_the_domain() -> None:
    assert source_category(url="https://www.example-shop.com/x")[1:] == ("other", "rule:no rule")
    DomainCategory.objects.create(domain="example-shop.com", category="advocacy")
    DomainCategory.objects.create(domain="research.example-shop.com", category="research")
    assert source_category(url="https://www.example-shop.com/x")[1] == "advocacy"
    assert source_category(url="https://research.example-shop.com/paper")[1:] == (
        "research",
        "mapping:research.example-shop.com (admin)",
    )


def test_the_reliability_prior_is_configurable() -> None:
    prior = categories.parse_prior("social=0, news=0.7")
    assert prior["social"] == 0 and prior["news"] == 0.7 and prior["health_authority"] == 1.0
    with pytest.raises(ValueError, match="unknown source category"):
        categories.parse_prior("blogs=0.1")


@pytest.mark.django_db
def test_the_optional_llm_step_classifies_unknown_domains_once(llm_server: Any, settings: Any) -> None:
    from tests.support.llm_server import Reply

    settings.SOURCE_CATEGORY_LLM = True
    llm_server.script(Reply("5"))  # 5. Health portal (the order of CATEGORY_LABELS)
    domain, category, method = source_category(
        url="https://www.example-shop.com/health", title="Health", allow_llm=True
    )
    assert (domain, category) == (
        "example-shop.com",
        "portal",
    ) and method == "mapping:example-shop.com (llm:scripted-model)"
    assert split_data_block(llm_server.requests[0]["messages"][1]["content"])[1]["domain"] == "example-shop.com"
    assert source_category(url="https://example-shop.com/other", allow_llm=True)[1] == "portal"
    assert len(llm_server.requests) == 1  # kept in the mapping table, where an admin can correct it
    assert source_category(url="https://www.cdc.gov/flu", allow_llm=True)[1] == "health_authority"  # rules first
    assert len(llm_server.requests) == 1
