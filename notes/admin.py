from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from notes.models import DraftJob, Note, NoteStatusChange, Participant, Post, Rating, SupernoteComparison


@admin.register(Post)
class PostAdmin(admin.ModelAdmin):
    list_display = ("id", "text", "author_handle", "topic", "created_at", "is_demo")
    list_filter = ("topic", "is_demo", "created_at")
    search_fields = ("text", "external_id", "author_handle")


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ("id", "text", "origin", "status", "intercept", "factor", "num_ratings", "created_at")
    list_filter = ("origin", "status", "classification", "is_demo", "created_at")
    search_fields = ("text", "external_id")
    raw_id_fields = ("post", "author", "draft_job")
    actions = ["rescore_notes"]

    @admin.action(description="Rescore all notes now (Community Notes scorer)", permissions=["run_scoring"])
    def rescore_notes(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        # Deferred: the services import the whole app (numpy, the scorer); admin modules load in
        # every process's django.setup().
        from notes.scoring import services

        services.notes_rescore_request(user=request.user)  # type: ignore[arg-type]
        self.message_user(request, "Rescoring queued on the cpu queue; statuses update when it finishes.")

    def has_run_scoring_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("notes.run_scoring")


@admin.register(NoteStatusChange)
class NoteStatusChangeAdmin(admin.ModelAdmin):
    list_display = ("note", "previous_status", "status", "changed_at")
    list_filter = ("status", "changed_at")
    raw_id_fields = ("note",)


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("external_id", "user", "rater_intercept", "rater_factor", "scored_at")
    search_fields = ("external_id", "user__username")
    raw_id_fields = ("user",)


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ("note", "rater", "level", "created_at")
    list_filter = ("level", "created_at")
    raw_id_fields = ("note", "rater")


@admin.register(DraftJob)
class DraftJobAdmin(admin.ModelAdmin):
    list_display = ("id", "post", "contributor", "mode", "state", "draft_method", "created_at")
    list_filter = ("mode", "state", "created_at")
    raw_id_fields = ("post", "contributor")


@admin.register(SupernoteComparison)
class SupernoteComparisonAdmin(admin.ModelAdmin):
    """Audit of the blind comparisons (the rater never sees which note is the Supernote; admins do)."""

    list_display = ("id", "rater", "supernote", "other_note", "supernote_first", "supernote_preferred", "answered_at")
    list_filter = ("supernote_preferred", "supernote_first", "answered_at")
    raw_id_fields = ("rater", "supernote", "other_note")
