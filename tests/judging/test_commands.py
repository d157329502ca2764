from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from judging.models import JudgeDecision, JudgeRun
from tests.judging.factories import answers

pytestmark = pytest.mark.django_db

POST = "Drinking bleach cures COVID-19."
SNIPPET = "Health agencies warn that drinking bleach is poisonous and does not cure COVID-19."


def _judge(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("judge_note", "--post", POST, *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_it_prints_the_gated_stages_as_json(llm_server: Any) -> None:
    llm_server.respond_with(
        answers(
            relevance="Snippet 1 is on point.\nFinal decision: yes", correctness="Distorts it.\nFinal decision: NO."
        )
    )
    result = _judge("--note", "Bleach is poison and never cures anything.", "--snippet", SNIPPET)
    assert [(s["stage"], s["verdict"]) for s in result["stages"]] == [("relevance", "yes"), ("correctness", "no")]
    assert result["helpful"] is False
    assert result["stages"][0] == {
        "stage": "relevance",
        "verdict": "yes",
        "reasoning": "Snippet 1: Snippet 1 is on point.",
        "judge": "llm:scripted-model",
        "note_text_judged": "Bleach is poison and never cures anything.",
    }
    assert not JudgeDecision.objects.exists() and not JudgeRun.objects.exists()


def test_it_reports_error_and_null_when_an_answer_never_parses(llm_server: Any) -> None:
    llm_server.respond_with(lambda messages: "I cannot decide.")
    result = _judge("--note", "Bleach is poison.", "--snippet", SNIPPET)
    assert result["stages"] == [
        {"stage": "relevance", "verdict": "error", "reasoning": "Snippet 1: I cannot decide.", "judge": "llm:scripted-model",
         "note_text_judged": "Bleach is poison."}
    ]  # fmt: skip
    assert result["helpful"] is None


def test_it_truncates_only_the_helpfulness_input_counting_urls_as_one(llm_server: Any) -> None:
    llm_server.respond_with(
        answers(relevance="Final decision: yes", correctness="Final decision: yes", helpfulness="Final decision: yes")
    )
    note = "Bleach is a poison. " * 20
    urls = ["https://who.int/a", "https://cdc.gov/b"]
    result = _judge("--note", note, "--url", *urls, "--snippet", SNIPPET, "--snippet", "Second snippet.")
    judged = [s["note_text_judged"] for s in result["stages"]]
    assert judged[0] == judged[1] == note
    assert len(judged[2]) <= 278 and note.startswith(judged[2])
    first = llm_server.requests[0]["messages"][-1]["content"]
    assert SNIPPET in first and "Second snippet." not in first  # each snippet on its own
    assert result["helpful"] is True


def _judge_offline(settings: Any, classifier_dir: Path) -> dict[str, Any]:
    """Judge a supported note with no LLM endpoint; a helpfulness classifier, if any, comes from classifier_dir."""
    settings.LLM_BASE_URL = ""
    settings.JUDGE_BASELINE_SIMILARITY = "lexical"
    settings.HELPFULNESS_CLASSIFIER_DIR = str(classifier_dir)
    return _judge(
        "--note",
        "Health agencies warn that drinking bleach is poisonous.",
        "--snippet",
        SNIPPET,
        "--url",
        "https://who.int/a",
    )


def test_it_uses_labelled_offline_baselines_without_an_endpoint(settings: Any, tmp_path: Path) -> None:
    result = _judge_offline(settings, tmp_path)
    assert [s["judge"].split(":")[0] for s in result["stages"]] == ["baseline"] * 3


def _tiny_dataset(root: Path) -> Path:
    helpful = [f"Health agencies and trials show claim {i} is false, see https://who.int/{i}" for i in range(14)]
    unhelpful = [f"lol whatever {i}, you people are idiots" for i in range(10)]
    notes = root / "colin-fraser"
    scored = root / "shiruken"
    notes.mkdir(parents=True)
    scored.mkdir()
    rows = [(str(1000 + i), t, "CURRENTLY_RATED_HELPFUL") for i, t in enumerate(helpful)]
    rows += [(str(2000 + i), t, "CURRENTLY_RATED_NOT_HELPFUL") for i, t in enumerate(unhelpful)]
    (notes / "notes-00000.tsv").write_text("noteId\tsummary\n" + "".join(f"{i}\t{t}\n" for i, t, _ in rows))
    (scored / "scoredNotes_2023-02-18.tsv").write_text(
        "noteId\tratingStatus\n" + "".join(f"{i}\t{s}\n" for i, _, s in rows)
    )
    return root


def test_it_trains_reports_and_then_judges_with_the_classifier(settings: Any, tmp_path: Path) -> None:
    data = _tiny_dataset(tmp_path / "data")
    models = tmp_path / "models"
    out = io.StringIO()
    call_command("train_helpfulness_classifier", "--data-dir", str(data), "--output-dir", str(models), stdout=out)
    text = out.getvalue()
    assert "examples: 24 (14 helpful, 10 not helpful)" in text
    assert "held-out macro-F1" in text and "macro-accuracy" in text
    version = (models / "LATEST").read_text().strip()
    assert json.loads((models / version / "meta.json").read_text())["metrics"]["n_examples"] == 24

    result = _judge_offline(settings, models)
    assert result["stages"][2]["judge"] == f"classifier:{version}"


def test_it_queues_runs_for_existing_notes_once(django_capture_on_commit_callbacks: Any) -> None:
    from tests.judging.factories import note_with_evidence

    first, second = note_with_evidence(), note_with_evidence(text="Another note on the MMR vaccine.")
    out = io.StringIO()
    with django_capture_on_commit_callbacks() as callbacks:
        call_command("judge_notes", str(first.pk), stdout=out)
        call_command("judge_notes", stdout=out)
    assert JudgeRun.objects.filter(note=first).count() == 1 and JudgeRun.objects.filter(note=second).count() == 1
    assert len(callbacks) == 2


def test_judge_notes_skips_notes_on_imported_posts_without_text(django_capture_on_commit_callbacks: Any) -> None:
    from tests.judging.factories import note_with_evidence

    real, imported = note_with_evidence(), note_with_evidence(text="A note on an imported post.")
    imported.post.text_available = False
    imported.post.save()
    out = io.StringIO()
    with django_capture_on_commit_callbacks():
        call_command("judge_notes", stdout=out)
    assert JudgeRun.objects.filter(note=real).exists() and not JudgeRun.objects.filter(note=imported).exists()
    assert "1 skipped (imported post without text)" in out.getvalue()
