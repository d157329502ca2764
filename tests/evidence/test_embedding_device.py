"""EMBEDDING_DEVICE reaches the model loader (plumbing only: this machine has no GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from evidence import embedding


def test_it_loads_on_the_configured_device(settings: Any) -> None:
    settings.EMBEDDING_DEVICE = "cpu"
    assert embedding.default_device() == "cpu"
    model = embedding.load_model(embedding.MINILM, max_seq_length=None)
    assert model.device.type == "cpu"


def test_it_passes_a_gpu_device_to_torch(settings: Any) -> None:
    settings.EMBEDDING_DEVICE = "cuda:0"
    assert embedding.default_device() == "cuda:0"
    # The CPU-only torch build refuses CUDA: proof that the setting reached the loader.
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        embedding.load_model(embedding.MINILM, max_seq_length=None)


def test_it_refuses_an_unknown_device_at_startup() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='crowdnotes_site.settings'; "
         "from django.conf import settings; settings.EMBEDDING_DEVICE"],
        env={**__import__("os").environ, "EMBEDDING_DEVICE": "gpu", "DEBUG": "1"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "EMBEDDING_DEVICE must be cpu, cuda, cuda:N or mps" in result.stderr
