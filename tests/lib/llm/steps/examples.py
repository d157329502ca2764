"""The post and snippets every step test uses."""

from __future__ import annotations

from crowdnotes_site.lib.llm.steps.common import Evidence

POST = "Vitamin C cures cancer, doctors won't tell you."
SNIPPETS = [
    Evidence(
        "High-dose vitamin C has been studied in cancer patients. Trials have not shown that it cures cancer. "
        "Some studies looked at quality of life.",
        "https://cancer.gov/vitc",
    ),
    Evidence("The weather in Paris is mild in spring.", "https://travel.example/paris"),
]
