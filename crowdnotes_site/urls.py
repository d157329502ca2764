from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from crowdnotes_site.banners import banners
from crowdnotes_site.favicon import favicon
from crowdnotes_site.health import healthz
from crowdnotes_site.limits import limited

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("banners/", banners, name="banners"),
    path("accounts/login/", limited("login")(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The admin's own log-in form, under the same per-address limit (the same counter) as the
    # site's; django-axes' lockout already guards both (it sits in the authentication backends).
    path("django-admin/login/", limited("login")(admin.site.login), name="admin_login"),
    path("django-admin/", admin.site.urls),
    path("judging/", include("judging.urls")),
    path("analytics/", include("notes.analytics.urls")),
    path("evidence/", include("evidence.urls")),
    path("x/", include("xnotes.urls")),
    path("", include("notes.urls")),
]
