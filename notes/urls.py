from __future__ import annotations

from django.urls import path

from notes import views

urlpatterns = [
    path("", views.home, name="home"),
    path("posts/<int:post_id>/", views.post_detail, name="post_detail"),
    path("accounts/signup/", views.signup, name="signup"),
    path("rate/", views.rating_queue, name="rating_queue"),
    path("rate/<int:note_id>/", views.rate_note, name="rate_note"),
    path("scoring/rescore/", views.rescore, name="rescore"),
]
