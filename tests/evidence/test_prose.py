"""The prose signal (evidence.prose): reference lists, tables and menus score low, running text
high, and a low score demotes (multiplies) a match score rather than dropping the passage."""

from __future__ import annotations

import pytest

from evidence.prose import DEMOTION, demotion, join_wrapped_lines, prose_features, prose_score

PROSE = (
    "In 1992, the American Academy of Pediatrics recommended that healthy babies be placed on their backs to "
    "sleep. That recommendation, along with the 1994 Back-to-Sleep campaign, encouraged caregivers to place "
    "infants on their backs to sleep, and coincided with a dramatic reduction in the SIDS rate in the United "
    "States. Research has found the rate of SIDS declined dramatically following the campaign, and then "
    "stabilized in the 2000s at a time when the number of infant immunizations was increasing."
)
# Reference lists as the corpus' pages print them: one entry per line (HTML) ...
HTML_REFERENCES = "\n".join(
    [
        "- Moro PL, Arana J, Cano M, Lewis P, Shimabukuro TT. Deaths Reported to the Vaccine Adverse Event "
        "Reporting System, United States, 1997-2013. Clin Infect Dis. 2015;61(6):980-7.",
        "- Classification and diagnosis of diabetes: Standards of medical care in diabetes — 2022. Diabetes "
        "Care. 2022; doi:10.2337/dc22-S002.",
        "- Diabetes risk factors. Centers for Disease Control and Prevention. "
        "https://www.cdc.gov/diabetes/basics/risk-factors.html. Accessed June 2, 2022.",
        "- Griffin MR, Ray WA, Livengood JR, et al. Risk of sudden infant death syndrome after immunization "
        "with diphtheria-tetanus-pertussis vaccine. N Engl J Med. 1988;319(10):618-23.",
    ]
)
# ... and wrapped over short lines, numbered, as a PDF's text layer gives them.
PDF_REFERENCES = """28. 28. Scheckler WE, Brimhall D, Buck AS,
Farr BM, Friedman C, Garibaldi RA, et al.
Requirements for infrastructure and essential
activities of infection control and epidemiology
in hospitals: a consensus panel report. Infect
Control Hosp Epidemiol. 1998;19(2):114-24.
29. Zingg W, Holmes A, Dettenkofer M, Goetz T,
Secci F, Pittet D, et al. Hospital organisation,
management, and structure for prevention of
health-care-associated infection: a systematic
review and expert consensus. Lancet Infect Dis.
2015;15(2):212-24.
30. Pittet D, Allegranzi B, Storr J, Bagheri
Nejad S, Dziekan G, Leotsakos A, et al.
Infection control as a major World Health
Organization priority for developing countries.
J Hosp Infect. 2008;68(4):285-92."""
PDF_PROSE = """Good hand hygiene, including use of alcohol-
based hand rubs (ABHR) and handwashing with
soap and water, is critical to reduce the risk of
spreading infections in outpatient settings. Use of
ABHR as the primary mode of hand hygiene in
healthcare settings is recommended by the CDC
and the World Health Organization because of its
activity against a broad spectrum of pathogens."""
TABLE = "\n".join(f"| {age} | {n} | {n + 3} | {2 * n} |" for age, n in [("0-9", 12), ("10-19", 40), ("20-29", 357)])
MENU = "Home\nAbout us\nNews\nContact\nCOVID-19 vaccines\nSign up\nDonate now\nPrivacy\nCareers"


def test_running_prose_scores_high() -> None:
    assert prose_score(PROSE) > 0.9
    assert prose_score(PDF_PROSE) > 0.8  # its hard-wrapped lines are joined, not counted as stubs


@pytest.mark.parametrize("text", [HTML_REFERENCES, PDF_REFERENCES], ids=["html", "pdf"])
def test_reference_lists_score_low(text: str) -> None:
    assert prose_features(text)["citations"] > 0.8
    assert prose_score(text) < 0.2


@pytest.mark.parametrize("text", [TABLE, MENU], ids=["table", "menu"])
def test_tables_and_menus_score_below_prose(text: str) -> None:
    assert prose_score(text) < 0.6


def test_a_passage_half_prose_half_references_sits_in_between() -> None:
    mixed = PROSE + "\n" + HTML_REFERENCES
    assert prose_score(HTML_REFERENCES) < prose_score(mixed) < prose_score(PROSE)


def test_prose_that_cites_a_year_or_a_doi_is_still_prose() -> None:
    text = PROSE + " The findings were published in Pediatrics in 2016 (doi:10.1542/peds.2016-2940)."
    assert prose_score(text) > 0.8


def test_demotion_multiplies_and_never_drops() -> None:
    assert demotion(1.0) == 1.0
    assert demotion(0.0) == pytest.approx(1 - DEMOTION)
    assert 0 < demotion(0.0) < demotion(0.5) < demotion(1.0)


def test_joining_wrapped_lines_keeps_offsets_and_headings() -> None:
    text = "Hand Hygiene\nGood hand hygiene, including use of alcohol-\nbased hand rubs, is critical."
    joined = join_wrapped_lines(text)
    assert len(joined) == len(text)
    assert joined.startswith("Hand Hygiene\nGood")  # a heading stays its own line
    assert "alcohol- based" in joined
