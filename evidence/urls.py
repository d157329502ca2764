from __future__ import annotations

from django.urls import path

from evidence import views

urlpatterns = [
    path("prefetch/", views.prefetch_view, name="evidence_prefetch"),
]
