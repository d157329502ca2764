"""Source categories: which kind of publisher a URL belongs to (pure: no ORM, no settings).

The rules look at the registered domain (`tldextract`, with its bundled public-suffix snapshot,
so nothing is downloaded) and the host: a table of known publishers first, then suffix rules
(government, university, .org). The admin-editable mapping table (evidence.models.DomainCategory)
is consulted before these rules by `evidence.search.services.source_category`; an optional LLM
step handles what the rules leave as "other".

The reliability prior of the offline utility baseline is defined here too, per category.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

HEALTH_AUTHORITY = "health_authority"
RESEARCH = "research"
NEWS = "news"
SOCIAL = "social"
PORTAL = "portal"
ADVOCACY = "advocacy"
OTHER = "other"

CATEGORY_LABELS: dict[str, str] = {
    HEALTH_AUTHORITY: "Health authority",
    RESEARCH: "Research literature",
    NEWS: "News media",
    SOCIAL: "Social media",
    PORTAL: "Health portal",
    ADVOCACY: "Commercial, advocacy or NGO",
    OTHER: "Other",
}

# The offline utility baseline adds weight x prior to a candidate's relevance: health authorities
# and research above portals, news above blogs and social media (the study's ordering of trust).
DEFAULT_RELIABILITY_PRIOR: dict[str, float] = {
    HEALTH_AUTHORITY: 1.0,
    RESEARCH: 0.9,
    PORTAL: 0.6,
    NEWS: 0.5,
    ADVOCACY: 0.3,
    OTHER: 0.3,
    SOCIAL: 0.1,
}

# Known publishers by registered domain (or full host, checked first).
KNOWN: dict[str, str] = {
    # Research literature (specific hosts of government domains come first: PubMed is research).
    "pubmed.ncbi.nlm.nih.gov": RESEARCH,
    "ncbi.nlm.nih.gov": RESEARCH,
    "pmc.ncbi.nlm.nih.gov": RESEARCH,
    "clinicaltrials.gov": RESEARCH,
    "doi.org": RESEARCH,
    "nature.com": RESEARCH,
    "springer.com": RESEARCH,
    "sciencedirect.com": RESEARCH,
    "thelancet.com": RESEARCH,
    "nejm.org": RESEARCH,
    "bmj.com": RESEARCH,
    "jamanetwork.com": RESEARCH,
    "plos.org": RESEARCH,
    "biorxiv.org": RESEARCH,
    "medrxiv.org": RESEARCH,
    "arxiv.org": RESEARCH,
    "acpjournals.org": RESEARCH,
    "wiley.com": RESEARCH,
    "cochranelibrary.com": RESEARCH,
    "cochrane.org": RESEARCH,
    "frontiersin.org": RESEARCH,
    "mdpi.com": RESEARCH,
    "oup.com": RESEARCH,
    "cell.com": RESEARCH,
    "science.org": RESEARCH,
    "tandfonline.com": RESEARCH,
    "sagepub.com": RESEARCH,
    "nih.gov": HEALTH_AUTHORITY,
    # Health authorities that are not under a government suffix.
    "who.int": HEALTH_AUTHORITY,
    "paho.org": HEALTH_AUTHORITY,
    "ecdc.europa.eu": HEALTH_AUTHORITY,
    "ema.europa.eu": HEALTH_AUTHORITY,
    "nhs.uk": HEALTH_AUTHORITY,
    "canada.ca": HEALTH_AUTHORITY,
    "covid19usvi.com": HEALTH_AUTHORITY,
    "countyofkings.com": HEALTH_AUTHORITY,
    # Health portals.
    "mayoclinic.org": PORTAL,
    "webmd.com": PORTAL,
    "healthline.com": PORTAL,
    "medicalnewstoday.com": PORTAL,
    "clevelandclinic.org": PORTAL,
    "verywellhealth.com": PORTAL,
    "everydayhealth.com": PORTAL,
    "drugs.com": PORTAL,
    "medscape.com": PORTAL,
    "patient.info": PORTAL,
    "onmeda.de": PORTAL,
    "hopkinsmedicine.org": PORTAL,
    "msdmanuals.com": PORTAL,
    "merckmanuals.com": PORTAL,
    "netdoktor.de": PORTAL,
    # News media (fact-checkers included: they publish journalism).
    "nytimes.com": NEWS,
    "bbc.co.uk": NEWS,
    "bbc.com": NEWS,
    "reuters.com": NEWS,
    "apnews.com": NEWS,
    "cnn.com": NEWS,
    "theguardian.com": NEWS,
    "washingtonpost.com": NEWS,
    "forbes.com": NEWS,
    "vox.com": NEWS,
    "msn.com": NEWS,
    "express.co.uk": NEWS,
    "globalnews.ca": NEWS,
    "livescience.com": NEWS,
    "statnews.com": NEWS,
    "npr.org": NEWS,
    "politifact.com": NEWS,
    "snopes.com": NEWS,
    "factcheck.org": NEWS,
    "fullfact.org": NEWS,
    "healthfeedback.org": NEWS,
    "afp.com": NEWS,
    "polygraph.info": NEWS,
    "spiegel.de": NEWS,
    "zeit.de": NEWS,
    "faz.net": NEWS,
    "lefigaro.fr": NEWS,
    "elmundo.es": NEWS,
    "dw.com": NEWS,
    "scmp.com": NEWS,
    "nymag.com": NEWS,
    "bloomberg.com": NEWS,
    "nbcnews.com": NEWS,
    "cbsnews.com": NEWS,
    "abcnews.go.com": NEWS,
    "foxnews.com": NEWS,
    "usatoday.com": NEWS,
    "latimes.com": NEWS,
    "wsj.com": NEWS,
    "time.com": NEWS,
    "newsweek.com": NEWS,
    "sciencesetavenir.fr": NEWS,
    "spektrum.de": NEWS,
    "nachrichten.at": NEWS,
    "newsnation.in": NEWS,
    # Social media and blogs.
    "twitter.com": SOCIAL,
    "x.com": SOCIAL,
    "facebook.com": SOCIAL,
    "instagram.com": SOCIAL,
    "youtube.com": SOCIAL,
    "youtu.be": SOCIAL,
    "tiktok.com": SOCIAL,
    "reddit.com": SOCIAL,
    "linkedin.com": SOCIAL,
    "t.me": SOCIAL,
    "medium.com": SOCIAL,
    "substack.com": SOCIAL,
    "blogspot.com": SOCIAL,
    "wordpress.com": SOCIAL,
    "rumble.com": SOCIAL,
    "bitchute.com": SOCIAL,
    # Commercial, advocacy and NGOs.
    "cancer.org": ADVOCACY,
    "heart.org": ADVOCACY,
    "redcross.org": ADVOCACY,
    "gavi.org": ADVOCACY,
    "childrenshealthdefense.org": ADVOCACY,
    "pfizer.com": ADVOCACY,
    "modernatx.com": ADVOCACY,
    "amazon.com": ADVOCACY,
    "wikipedia.org": OTHER,
}

# Government suffixes: gov, gov.xx, govt.nz, gouv.fr, gob.mx, go.id, go.jp, gv.at, admin.ch, ...
_GOV_SUFFIX = re.compile(r"(^|\.)(gov|govt|gouv|gob|go|gv|mil)(\.[a-z]{2})?$|^(admin\.ch|europa\.eu)$")
_GOV_DOMAIN = re.compile(r"^(gov|govt|gouv|gob)\.[a-z]{2}$")  # gov.pl registered as the domain itself
_EDU_SUFFIX = re.compile(r"(^|\.)(edu|ac)(\.[a-z]{2})?$")
# Words in a government host or path that make it a health body (not a court or a tax office).
_HEALTH_HINT = re.compile(
    r"health|cdc|nih|fda|hhs|dph|dhhs|dhss|medic|hospital|covid|corona|vaccin|disease|salud|sante|gesund|"
    r"sozialministerium|kemkes|mohfw|koronawirus|sahealth|impf",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CategoryDecision:
    domain: str  # the registered domain (e.g. "nih.gov"), "" when the URL has no host
    category: str
    rule: str  # which rule decided, for the audit ("known:nih.gov", "government+health", ...)


@functools.lru_cache(maxsize=1)
def _extractor():  # type: ignore[no-untyped-def]
    import tldextract

    # No suffix_list_urls: the bundled snapshot of the public-suffix list, never a download.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def host_of(url: str) -> str:
    try:
        return (urlsplit(url.strip()).hostname or "").rstrip(".").lower()
    except ValueError:
        return ""


def is_loopback(host: str | None) -> bool:
    """A name of this machine itself: localhost, 127.0.0.0/8 or ::1 (one place under several names)."""
    host = (host or "").strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def registered_domain(url: str) -> tuple[str, str]:
    """(host, registered domain) of a URL, e.g. ("pubmed.ncbi.nlm.nih.gov", "nih.gov")."""
    host = host_of(url)
    if not host:
        return "", ""
    parts = _extractor()(host)
    domain = parts.top_domain_under_public_suffix or parts.suffix or host
    return host, domain.lower()


def _suffix(domain: str) -> str:
    return domain.split(".", 1)[1] if "." in domain else domain


def category_by_rules(url: str) -> CategoryDecision:
    """The category of a URL's publisher by the built-in rules ("other" when none applies)."""
    host, domain = registered_domain(url)
    if not host:
        return CategoryDecision("", OTHER, "no host")
    labels = host.split(".")
    for i in range(len(labels) - 1):  # the most specific known host first
        candidate = ".".join(labels[i:])
        if candidate in KNOWN:
            return CategoryDecision(domain, KNOWN[candidate], f"known:{candidate}")
    suffix = _suffix(domain)
    if _GOV_SUFFIX.search(suffix) or _GOV_DOMAIN.match(domain) or domain in ("admin.ch", "europa.eu"):
        try:
            path = urlsplit(url).path
        except ValueError:
            path = ""
        if _HEALTH_HINT.search(host) or _HEALTH_HINT.search(path):
            return CategoryDecision(domain, HEALTH_AUTHORITY, "government+health")
        return CategoryDecision(domain, OTHER, "government (not health)")
    if _EDU_SUFFIX.search(suffix):
        return CategoryDecision(domain, RESEARCH, "university")
    if suffix == "org":
        return CategoryDecision(domain, ADVOCACY, "org suffix")
    return CategoryDecision(domain, OTHER, "no rule")


# The corpus manifest's page categories (../shared/data/webpages/manifest.tsv) in our terms.
MANIFEST_CATEGORIES: dict[str, str] = {
    "health_authority": HEALTH_AUTHORITY,
    "health_portal": PORTAL,
    "research": RESEARCH,
    "fact_check": NEWS,
    "news": NEWS,
}


def parse_prior(spec: str) -> dict[str, float]:
    """`health_authority=1,research=0.9,...` (the SEARCH_RELIABILITY_PRIOR setting) over the defaults."""
    prior = dict(DEFAULT_RELIABILITY_PRIOR)
    for item in spec.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        if not name:
            continue
        if name not in CATEGORY_LABELS:
            raise ValueError(f"unknown source category {name!r} in the reliability prior")
        prior[name] = float(value)
    return prior
