from __future__ import annotations

from django.urls import path

from judging import views

app_name = "judging"

urlpatterns = [
    path("audit/", views.decision_list, name="decision_list"),
    path("audit/export.csv", views.decision_export, name="decision_export"),
    path("audit/<int:decision_id>/", views.decision_detail, name="decision_detail"),
    path("audit/<int:decision_id>/override/", views.decision_override, name="decision_override"),
    path("preflight/", views.preflight, name="preflight"),
    path("preflight/<int:check_id>/", views.preflight_detail, name="preflight_detail"),
    path("benchmark/", views.benchmark_results, name="benchmark_results"),
    path("llm-usage/", views.llm_usage, name="llm_usage"),
]
