from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from judging.models import JudgeDecision, JudgeRun
from tests.judging.factories import answers
from tests.support import real_folder as rf

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


def _real_folder(root: Path) -> Path:
    """A tiny folder in the real Community Notes layout: 14 Helpful notes citing a source, 10 Not Helpful ones."""
    day = rf.at(2025, 3, 1)
    helpful = [
        rf.note(
            day,
            f"post-{i}",
            i,
            summary=f"Health agencies and trials show claim {i} is false, see https://who.int/{i}",
            status=rf.CRH,
            statusMature="1",
            lang="en",
        )
        for i in range(14)
    ]
    unhelpful = [
        rf.note(
            day,
            f"post-{i}",
            100 + i,
            summary=f"lol whatever {i}, you people are idiots",
            status=rf.CRNH,
            statusMature="1",
            lang="en",
        )
        for i in range(10)
    ]
    return rf.write(root, helpful + unhelpful, [])


def test_it_trains_reports_and_then_judges_with_the_classifier(settings: Any, tmp_path: Path) -> None:
    data = _real_folder(tmp_path / "real")
    models = tmp_path / "models"
    out = io.StringIO()
    call_command(
        "train_helpfulness_classifier", "--folder", str(data), "--output-dir", str(models), "--seeds", "2", stdout=out
    )
    text = out.getvalue()
    assert "saved: 24 notes (10 Not Helpful), years [2025]" in text
    assert "| all notes | trained judge | 24 | 10 |" in text and "| all notes | cites a URL | 24 | 10 | 1.000 |" in text
    version = (models / "LATEST").read_text().strip()
    assert json.loads((models / version / "meta.json").read_text())["n"] == 24

    result = _judge_offline(settings, models)
    assert result["stages"][2]["judge"] == f"classifier:{version}"


def _judge_helpfulness(path: Path) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("judge_helpfulness", "--notes", str(path), "--json", stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_judge_helpfulness_prints_a_json_line_per_note_and_trains_first_when_no_model_is_saved(
    settings: Any, tmp_path: Path, capsys: Any
) -> None:
    settings.COMMUNITYNOTES_REAL_DIR = _real_folder(tmp_path / "real")
    settings.HELPFULNESS_CLASSIFIER_DIR = str(tmp_path / "models")
    notes = tmp_path / "notes.jsonl"
    lines = [
        {"noteId": "a1", "summary": "Trials show claim 99 is false, see https://who.int/99", "post_text": None,
         "lang": "en", "classification": "MISINFORMED_OR_POTENTIALLY_MISLEADING"},
        {"noteId": "b2", "summary": "lol whatever, you people are idiots", "post_text": "A post", "lang": None,
         "classification": None},
    ]  # fmt: skip
    notes.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    err = io.StringIO()
    out = io.StringIO()
    call_command("judge_helpfulness", "--notes", str(notes), "--json", stdout=out, stderr=err)
    assert "no saved helpfulness model: training one from" in err.getvalue()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["noteId"] for r in rows] == ["a1", "b2"]
    assert rows[0]["helpful"] is True and rows[1]["helpful"] is False
    assert rows[0]["score"] > 0.5 > rows[1]["score"]
    # The second call reuses the saved model: it says nothing on stderr and gives the same scores.
    err = io.StringIO()
    out = io.StringIO()
    call_command("judge_helpfulness", "--notes", str(notes), "--json", stdout=out, stderr=err)
    assert err.getvalue() == "" and [json.loads(line) for line in out.getvalue().splitlines()] == rows


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"noteId": "a", "summary": "ok https://a.org"}', "not json"], "line 2: not JSON"),
        (['{"noteId": "a", "summary": "  "}'], "line 1: 'summary' is empty"),
        (['{"summary": "text"}'], "line 1: missing 'noteId'"),
        (["", '["a list"]'], "line 2: a JSON object is expected"),
    ],
)
def test_judge_helpfulness_refuses_bad_input_naming_the_line(
    settings: Any, tmp_path: Path, lines: list[str], message: str
) -> None:
    settings.HELPFULNESS_CLASSIFIER_DIR = str(tmp_path / "models")
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match=message):
        _judge_helpfulness(path)
    assert not (tmp_path / "models").exists()  # refused before any training


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
