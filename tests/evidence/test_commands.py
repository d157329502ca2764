"""The evidence operator commands: evidence_probe and evidence_warmup."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.web_server import WebServer

from .conftest import MEASLES, article

POST = "The MMR vaccine does not protect kids from measles at all."


def _probe(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("evidence_probe", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_it_probes_a_url_and_prints_json(web_server: WebServer) -> None:
    url = web_server.add("/article", article(MEASLES * 3, title="Measles").encode())
    result = _probe(url, "--post", POST, "--strategy", "exhaustive")
    assert result["ok"] is True
    assert result["error_code"] is None
    assert result["final_url"] == url
    assert result["content_type"] == "text/html"
    assert result["title"] == "Measles"
    assert result["n_passages"] >= 1
    assert "97 percent" in result["best_passage"]["text"]
    assert set(result["best_passage"]) >= {"text", "score", "chunk_index", "sentence", "sentence_score"}
    # The exact text the snippet page highlights: a sentence of the best passage, the one about MMR.
    assert result["best_passage"]["sentence"] == MEASLES[1]
    assert result["best_passage"]["sentence"] in result["best_passage"]["text"]
    assert set(result["timings_ms"]) >= {"fetch", "extract", "match", "sentence"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "code"), [("http://10.0.0.1/", "blocked_address"), ("ftp://example.org/", "bad_scheme")]
)
def test_it_probes_failures_with_exit_status_zero(url: str, code: str) -> None:
    result = _probe(url, "--post", POST)
    assert result["ok"] is False
    assert result["error_code"] == code
    assert result["best_passage"] is None


def test_it_refuses_probe_misuse() -> None:
    with pytest.raises(CommandError):
        call_command("evidence_probe", "http://example.org/", "--post", "   ")
    with pytest.raises(CommandError):
        call_command("evidence_probe", "http://example.org/")


def test_it_warms_up_the_model_and_its_prefilter_table(settings: Any, tmp_path: Any) -> None:
    settings.MODEL_CACHE_DIR = tmp_path
    out = StringIO()
    call_command("evidence_warmup", "--model", "all-MiniLM-L6-v2", stdout=out)
    assert (tmp_path / "static-all-MiniLM-L6-v2.npy").exists()
    assert "all-MiniLM-L6-v2: ready" in out.getvalue()
    # It says what it is doing while the table is computed (before: silent for 1-2 minutes).
    assert "1/2 loading the embedding model all-MiniLM-L6-v2" in out.getvalue()
    assert "pre-filter table   0%" in out.getvalue() or "pre-filter table  10%" in out.getvalue()
    assert "pre-filter table 100%" in out.getvalue()
