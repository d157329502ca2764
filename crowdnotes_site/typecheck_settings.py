"""Settings for the type checker only: never run the site with them.

mypy's django-stubs plugin imports a settings module to load the app registry
(`[tool.django-stubs]` in pyproject.toml points here). The real settings require SECRET_KEY
unless DEBUG is on, and that stays so; this module only supplies a random, throwaway key when
none is set, so a plain `mypy .` works without special environment. Everything else is
`crowdnotes_site.settings` unchanged, and types are checked against that module's code.
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("SECRET_KEY", f"typecheck-only-{secrets.token_urlsafe(32)}")

from crowdnotes_site.settings import *  # noqa: F403
