from __future__ import annotations

from django.contrib import admin

from judging.models import JudgeDecision, JudgeOverride, JudgeRun


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("note", "state", "stage", "helpful", "attempts", "error", "created_at")
    list_filter = ("state", "helpful", "created_at")
    raw_id_fields = ("note",)


@admin.register(JudgeDecision)
class JudgeDecisionAdmin(admin.ModelAdmin):
    list_display = ("note", "stage", "verdict", "judge_kind", "judge_name", "latency_ms", "created_at")
    list_filter = ("stage", "verdict", "judge_kind", "judge_name", "created_at")
    raw_id_fields = ("note", "run", "overridden_by")


@admin.register(JudgeOverride)
class JudgeOverrideAdmin(admin.ModelAdmin):
    list_display = ("decision", "previous_verdict", "verdict", "by", "at")
    list_filter = ("verdict", "at")
    raw_id_fields = ("decision", "by")
