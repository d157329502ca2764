from __future__ import annotations

from django.urls import path

from notes.analytics import views

app_name = "analytics"

urlpatterns = [
    path("", views.analytics_index, name="index"),
    path("delays/", views.delays_page, name="delays"),
    path("delays.csv", views.delays_csv, name="delays_csv"),
    path("spikes/", views.spikes_page, name="spikes"),
    path("judging/", views.judging_page, name="judging"),
    path("research/", views.research_page, name="research"),
]
