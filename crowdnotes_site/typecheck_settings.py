"""Settings for the type checker only: never run the site with them.

mypy's django-stubs plugin imports a settings module to load the app registry
(`[tool.django-stubs]` in pyproject.toml points here). The real settings require SECRET_KEY
unless DEBUG is on, and DATABASE_URL unless DEBUG or CROWDNOTES_EMBEDDED is on, and that stays
so; this module only supplies a random, throwaway key and the embedded mode when they are not
set, so a plain `mypy .` works without special environment (it connects to no database).
Everything else is `crowdnotes_site.settings` unchanged, and types are checked against that
module's code.
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("SECRET_KEY", f"typecheck-only-{secrets.token_urlsafe(32)}")
os.environ.setdefault("CROWDNOTES_EMBEDDED", "1")

from crowdnotes_site.settings import *  # noqa: F403
