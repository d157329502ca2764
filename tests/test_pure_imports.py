"""The pure cores load in a plain Python process: no Django, and crowdnotes_site.lib no app either
The modules are the ones import-linter's "lib-pure" and "app-cores-pure" contracts in
pyproject.toml name (every module under crowdnotes_site.lib, found by walking the package), so the
static contract and this run check the same list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FRESH_INTERPRETER = """
import importlib, json, pkgutil, sys
import crowdnotes_site.lib as lib
lib_modules = sorted(m.name for m in pkgutil.walk_packages(lib.__path__, "crowdnotes_site.lib."))
for name in lib_modules:
    importlib.import_module(name)
apps_after_lib = sorted(m for m in sys.modules if m.split(".")[0] in ("evidence", "judging", "notes", "xnotes"))
django_after_lib = "django" in sys.modules
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps({
    "lib_modules": lib_modules,
    "apps_after_lib": apps_after_lib,
    "django_after_lib": django_after_lib,
    "django": sorted(m for m in sys.modules if m == "django" or m.startswith("django.")),
}))
"""


def _app_cores() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}
    return list(contracts["app-cores-pure"]["source_modules"])


def test_the_pure_cores_import_no_django_in_a_fresh_interpreter() -> None:
    cores = _app_cores()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run(
        [sys.executable, "-c", FRESH_INTERPRETER, json.dumps(cores)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert "crowdnotes_site.lib.communitynotes.scoring.pipeline" in report["lib_modules"]  # the walk found the package
    assert "crowdnotes_site.lib.llm.client" in report["lib_modules"]
    assert report["apps_after_lib"] == []
    assert report["django_after_lib"] is False
    assert {"evidence.fetch", "notes.supernotes.eligibility", "xnotes.rules"} <= set(cores)  # the contract was read
    assert report["django"] == []


# Libraries that cost seconds to import (scikit-learn pulls scipy; openai pulls pydantic): they load
# where they are used (training or loading the classifier, a call to an LLM, the embedding model in
# a worker), never in a web process, a command's start or `manage.py check`.
HEAVY = ("sklearn", "scipy", "torch", "transformers", "sentence_transformers", "openai")
# Cheaper, but what kept django.setup() above a second: each loads where it is first used (numpy by
# the scorer and the matching code, Celery on the first send, requests by the X client).
NOT_AT_SETUP = (*HEAVY, "numpy", "celery", "kombu", "requests", "requests_oauthlib", "joblib")

WEB_PROCESS = """
import importlib, json, sys
import django
django.setup()
loaded = lambda names: sorted({m.split(".")[0] for m in sys.modules} & set(names))
names = json.loads(sys.argv[1])
after_setup = loaded(names["not_at_setup"])
from django.conf import settings
from django.core.management import call_command
from django.urls import get_resolver
def walk(patterns):
    count = 0
    for p in patterns:
        count += walk(p.url_patterns) if hasattr(p, "url_patterns") else 1
    return count
views = walk(get_resolver().url_patterns)  # every urls module, hence every views module, is imported
for app in ("crowdnotes_site", "evidence", "judging", "notes", "xnotes"):
    for part in ("admin", "forms", "selectors", "services"):
        try:
            importlib.import_module(f"{app}.{part}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{app}.{part}":
                raise
call_command("check", verbosity=0)
print(json.dumps({"after_setup": after_setup, "after_web": loaded(names["heavy"]), "views": views}))
"""


def test_django_setup_the_views_and_the_checks_load_no_heavy_library() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "LLM_BASE_URL": ""}
    names = {"heavy": HEAVY, "not_at_setup": NOT_AT_SETUP}
    out = subprocess.run(
        [sys.executable, "-c", WEB_PROCESS, json.dumps(names)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["views"] > 50  # the walk reached the apps' urls
    assert report["after_setup"] == []
    assert report["after_web"] == []
