from __future__ import annotations

from django.urls import path

from xnotes import views
from xnotes.models import XTaskRun

app_name = "xnotes"
urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("posts/<int:post_id>/", views.post, name="post"),
    path("notes/<int:note_id>/propose/", views.propose, name="propose"),
    path("writer/", views.writer, name="writer"),
    path("writer/fetch/", views.fetch_now, name="fetch_now"),
    path("writer/hydrate/", views.run_now, {"kind": XTaskRun.Kind.HYDRATE}, name="hydrate_now"),
    path("writer/sync/", views.run_now, {"kind": XTaskRun.Kind.SYNC}, name="sync_now"),
]
