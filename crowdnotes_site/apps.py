"""The site app. Importing the Celery app here (Django imports apps.py while it sets up) binds every
@shared_task to the configured app in web processes too; the package's __init__ stays empty so that
`crowdnotes_site.lib` loads without Django."""

from __future__ import annotations

from django.apps import AppConfig

from crowdnotes_site import celery  # noqa: F401


class CrowdnotesSiteConfig(AppConfig):
    name = "crowdnotes_site"
