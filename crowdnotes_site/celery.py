from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

from crowdnotes_site.logs import task_id_var

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")

app = Celery("crowdnotes")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger("crowdnotes.task")


@task_prerun.connect
def _bind_task_id(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    task_id_var.set(task_id or "")
    log.info("task started", extra={"task": getattr(task, "name", "")})


@task_postrun.connect
def _unbind_task_id(task: Any = None, state: str | None = None, **_: Any) -> None:
    log.info("task finished", extra={"task": getattr(task, "name", ""), "state": state})
    task_id_var.set("")
