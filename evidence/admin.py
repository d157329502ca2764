from __future__ import annotations

from django.contrib import admin

from evidence.models import EvidenceSource, Passage, Snippet


@admin.register(EvidenceSource)
class EvidenceSourceAdmin(admin.ModelAdmin):
    list_display = ("url", "title", "content_type", "error_code", "fetched_at")
    list_filter = ("error_code", "content_type", "fetched_at")
    search_fields = ("url", "title")


@admin.register(Passage)
class PassageAdmin(admin.ModelAdmin):
    list_display = ("source", "embedding_model", "chunk_index", "n_tokens")
    list_filter = ("embedding_model",)
    raw_id_fields = ("source",)
    exclude = ("embedding",)


@admin.register(Snippet)
class SnippetAdmin(admin.ModelAdmin):
    list_display = ("url", "state", "error_code", "similarity", "confirmation", "created_at")
    list_filter = ("state", "error_code", "confirmation")
    raw_id_fields = ("post", "draft_job", "note", "source", "passage", "confirmed_by")
