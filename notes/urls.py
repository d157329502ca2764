from __future__ import annotations

from django.urls import path

from notes import views

urlpatterns = [
    path("", views.home, name="home"),
    path("posts/<int:post_id>/", views.post_detail, name="post_detail"),
    path("accounts/signup/", views.signup, name="signup"),
]
