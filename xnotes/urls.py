from __future__ import annotations

from django.urls import path

from xnotes import views

app_name = "xnotes"
urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("posts/<int:post_id>/", views.post, name="post"),
    path("notes/<int:note_id>/propose/", views.propose, name="propose"),
    path("writer/", views.writer, name="writer"),
    path("writer/fetch/", views.fetch_now, name="fetch_now"),
]
