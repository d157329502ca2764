from __future__ import annotations

from django.contrib import admin

from evidence.models import AutomationRun, DomainCategory, EvidenceSource, Passage, Snippet, UtilityRound


@admin.register(EvidenceSource)
class EvidenceSourceAdmin(admin.ModelAdmin):
    list_display = ("url", "title", "domain", "category", "published_at", "indexed_at", "error_code", "fetched_at")
    list_filter = ("category", "indexed_at", "error_code", "content_type", "fetched_at")
    search_fields = ("url", "title", "domain")


@admin.register(Passage)
class PassageAdmin(admin.ModelAdmin):
    list_display = ("source", "embedding_model", "chunk_index", "n_tokens")
    list_filter = ("embedding_model",)
    raw_id_fields = ("source",)
    exclude = ("embedding",)


@admin.register(Snippet)
class SnippetAdmin(admin.ModelAdmin):
    list_display = ("url", "state", "error_code", "similarity", "confirmation", "proposed_by", "created_at")
    list_filter = ("state", "error_code", "confirmation")
    raw_id_fields = ("post", "draft_job", "note", "source", "passage", "confirmed_by", "proposed_by")


@admin.register(DomainCategory)
class DomainCategoryAdmin(admin.ModelAdmin):
    """The editable domain → category mapping (wins over the built-in rules)."""

    list_display = ("domain", "category", "method", "updated_at")
    list_editable = ("category",)
    list_filter = ("category", "method")
    search_fields = ("domain", "note")


class UtilityRoundInline(admin.TabularInline):
    model = UtilityRound
    extra = 0
    can_delete = False
    fields = ("number", "chosen_index", "chosen_url", "producer", "fallback", "attempts", "reasoning", "error")
    readonly_fields = fields
    show_change_link = True


@admin.register(AutomationRun)
class AutomationRunAdmin(admin.ModelAdmin):
    """Audit of "find evidence for me": the queries, the pool and every utility round."""

    list_display = ("id", "draft_job", "state", "stage", "tau", "cutoff", "single_query", "rank_order", "created_at")
    list_filter = ("state", "stage", "single_query", "rank_order", "created_at")
    raw_id_fields = ("draft_job",)
    readonly_fields = ("flow", "error", "attempts", "claimed_until", "started_at", "finished_at")
    inlines = [UtilityRoundInline]


@admin.register(UtilityRound)
class UtilityRoundAdmin(admin.ModelAdmin):
    list_display = ("run", "number", "chosen_url", "producer", "fallback", "attempts", "latency_ms")
    list_filter = ("producer", "fallback", "created_at")
    raw_id_fields = ("run",)
    readonly_fields = (
        "run", "number", "candidates", "chosen_index", "chosen_url", "reasoning", "producer", "prompt_version",
        "prompt", "raw_output", "attempts", "fallback", "error", "latency_ms", "created_at",
    )  # fmt: skip
