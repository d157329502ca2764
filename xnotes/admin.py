from __future__ import annotations

from django.contrib import admin

from xnotes.models import XEvaluation, XFetchRun, XPost, XProposal, XWrittenNote


@admin.register(XPost)
class XPostAdmin(admin.ModelAdmin):
    list_display = ("x_id", "post", "eligible", "lang", "hydrated_at", "lookup_error")
    list_filter = ("eligible", "lang")
    search_fields = ("x_id",)
    raw_id_fields = ("post",)


@admin.register(XProposal)
class XProposalAdmin(admin.ModelAdmin):
    list_display = ("note", "x_post_id", "state", "test_mode", "x_note_id", "created_at", "sent_at")
    list_filter = ("state", "test_mode")
    raw_id_fields = ("post", "note", "requested_by")


@admin.register(XWrittenNote)
class XWrittenNoteAdmin(admin.ModelAdmin):
    list_display = ("x_note_id", "x_post_id", "test_mode", "status", "created_at")
    list_filter = ("test_mode", "status")


admin.site.register(XEvaluation)
admin.site.register(XFetchRun)
