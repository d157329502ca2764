from __future__ import annotations

from django.db.models import Count, Prefetch, QuerySet

from notes.models import Note, Post


def posts_for_home(*, limit: int = 50) -> QuerySet[Post]:
    notes = Note.objects.select_related("author__user").order_by("-created_at")
    return (
        Post.objects.annotate(n_notes=Count("notes"))
        .prefetch_related(Prefetch("notes", queryset=notes))
        .order_by("-created_at")[:limit]
    )
