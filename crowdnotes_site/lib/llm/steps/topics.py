"""Health-topic labels of a post or note: prompt, LLM step and two offline baselines (keywords;
embedding similarity to category descriptions). Keywords are the default offline baseline: they
scored better on the labelled set (bench/README.md "Topic baselines")."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from crowdnotes_site.lib.llm.client import LLMClient, parse_number_only
from crowdnotes_site.lib.llm.steps.common import Messages, StepResult, baseline_result, data_messages, llm_step

if TYPE_CHECKING:
    import numpy as np

VERSIONS: dict[str, str] = {
    "topic": "topic-v2",
}


TOPIC_LABELS: tuple[str, ...] = (
    "diseases or conditions",
    "drugs, vaccines, treatments and tests",
    "public-health guidance or policy",
    "wellness products, diets and supplements",
    "healthcare professionals or systems",
    "biological or epidemiological concepts",
    "health conspiracies or hoaxes",
    "not health",
)


def topic_prompt(text: str) -> Messages:
    options = "\n".join(f"{i}. {label}" for i, label in enumerate(TOPIC_LABELS, start=1))
    return data_messages(
        "You classify social media posts by health topic.",
        {"text": text},
        f"Categories:\n{options}\n\n"
        "Which category fits the text of the data best? Reply with the category number only.",
    )


TOPIC_KEYWORDS: dict[str, tuple[str, ...]] = {
    TOPIC_LABELS[0]: (
        "cancer",
        "diabetes",
        "disease",
        "covid",
        "flu",
        "influenza",
        "autism",
        "measles",
        "infection",
        "syndrome",
        "heart attack",
        "stroke",
        "dementia",
        "obesity",
        "symptom",
    ),
    TOPIC_LABELS[1]: (
        "vaccine",
        "vaccin",
        "drug",
        "ivermectin",
        "hydroxychloroquine",
        "treatment",
        "medication",
        "pill",
        "dose",
        "test",
        "pcr",
        "antibiotic",
        "mrna",
        "jab",
        "booster",
        "therapy",
    ),
    TOPIC_LABELS[2]: (
        "mandate",
        "lockdown",
        "guidance",
        "policy",
        "cdc",
        "who ",
        "public health",
        "mask",
        "quarantine",
        "fda",
        "regulation",
        "recommend",
    ),
    TOPIC_LABELS[3]: (
        "supplement",
        "diet",
        "vitamin",
        "detox",
        "keto",
        "wellness",
        "herbal",
        "superfood",
        "fasting",
        "essential oil",
        "cleanse",
    ),
    TOPIC_LABELS[4]: (
        "doctor",
        "nurse",
        "hospital",
        "physician",
        "healthcare",
        "insurance",
        "medicare",
        "nhs",
        "pharma",
    ),
    TOPIC_LABELS[5]: (
        "immunity",
        "virus",
        "gene",
        "dna",
        "transmission",
        "herd",
        "mutation",
        "variant",
        "antibod",
        "epidemi",
        "pandemic",
        "spike protein",
    ),
    TOPIC_LABELS[6]: (
        "hoax",
        "plandemic",
        "conspiracy",
        "depopulation",
        "microchip",
        "bill gates",
        "cover-up",
        "coverup",
        "5g",
        "they don't want you",
    ),
}


def topic_label_llm(client: LLMClient, *, text: str) -> StepResult:
    def parse(answer: str) -> str | None:
        idx = parse_number_only(answer, lo=1, hi=len(TOPIC_LABELS))
        return TOPIC_LABELS[idx - 1] if idx is not None else None

    return llm_step(
        client,
        task="topic",
        prompt_version=VERSIONS["topic"],
        messages=topic_prompt(text),
        parse=parse,
    )


def topic_label_baseline(*, text: str) -> StepResult:
    """Keyword counts per category; "not health" when no keyword matches. Ties go to the
    earlier category except that conspiracy keywords win (they co-occur with others)."""
    started = time.monotonic()
    low = f" {text.lower()} "
    counts = {label: sum(low.count(k) for k in keys) for label, keys in TOPIC_KEYWORDS.items()}
    if counts[TOPIC_LABELS[6]]:
        label = TOPIC_LABELS[6]
    elif any(counts.values()):
        label = max(TOPIC_LABELS[:6], key=lambda lbl: counts[lbl])
    else:
        label = TOPIC_LABELS[7]
    reasoning = (
        "Keyword matches: " + ", ".join(f"{k}={v}" for k, v in counts.items() if v)
        if any(counts.values())
        else "No health keyword."
    )
    return baseline_result("keywords-v1", VERSIONS["topic"], label, reasoning, started)


# One short description per health category, written from the study's category names; the
# embedding baseline compares a text with each. Changing them changes the baseline's name.
TOPIC_DESCRIPTIONS: dict[str, str] = {
    TOPIC_LABELS[0]: "A disease, illness, medical condition or its symptoms, such as cancer, COVID-19 or diabetes.",
    TOPIC_LABELS[1]: "Drugs, vaccines, vaccination, medical treatments, side effects or diagnostic tests.",
    TOPIC_LABELS[
        2
    ]: "Public-health guidance, mandates or government health policy, such as masks, lockdowns, CDC advice.",
    TOPIC_LABELS[3]: "Wellness products, diets, vitamins, nutrition and dietary supplements.",
    TOPIC_LABELS[4]: "Doctors, nurses, hospitals, health insurance and the healthcare system.",
    TOPIC_LABELS[5]: "Biology and epidemiology: how viruses spread, immunity, infection rates, mortality statistics.",
    TOPIC_LABELS[6]: "Health conspiracy theories and hoaxes, such as microchips in vaccines or a planned pandemic.",
}
EMBEDDING_NAME = "embedding-descriptions-v1"
# Below this cosine to every health description a text is "not health" (fixed before evaluation,
# not tuned on the labelled set).
NOT_HEALTH_BELOW = 0.25

Embed = Callable[[Sequence[str]], "np.ndarray"]


def topic_label_embedding(*, text: str, embed: Embed, threshold: float = NOT_HEALTH_BELOW) -> StepResult:
    """The health category whose description is most similar to the text (cosine of
    L2-normalised embeddings from `embed`), or "not health" when every similarity is below
    `threshold`. `embed` is evidence.embedding.encoder() in the app (never call it in a request)."""
    # Deferred: numpy costs ~0.2 s to import; the steps package loads with every Django model.
    import numpy as np

    started = time.monotonic()
    labels = list(TOPIC_DESCRIPTIONS)
    vectors = embed([text, *TOPIC_DESCRIPTIONS.values()])
    sims = vectors[1:] @ vectors[0]
    best = int(np.argmax(sims))
    label = labels[best] if float(sims[best]) >= threshold else TOPIC_LABELS[7]
    reasoning = f"Best cosine {float(sims[best]):.2f} ({labels[best]}); not health below {threshold:.2f}."
    return baseline_result(EMBEDDING_NAME, VERSIONS["topic"], label, reasoning, started)
