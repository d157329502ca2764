"""The site app. The Celery app is not imported here: Celery costs ~0.3 s to import and most
processes never send a task. Workers load it themselves (`celery -A crowdnotes_site`), and a web
or command process loads it on its first send (`crowdnotes_site.queue.broker_app`, the only way
work is queued). The package's __init__ stays empty so that `crowdnotes_site.lib` loads without
Django."""

from __future__ import annotations

from django.apps import AppConfig


class CrowdnotesSiteConfig(AppConfig):
    name = "crowdnotes_site"
