from __future__ import annotations

from django.urls import path

from notes import views
from notes.living import views as living
from notes.scoring import views as scoring
from notes.supernotes import views as supernotes

urlpatterns = [
    path("", views.home, name="home"),
    path("posts/<int:post_id>/", views.post_detail, name="post_detail"),
    path("posts/spiking/", views.spiking_posts, name="spiking_posts"),
    path("accounts/signup/", views.signup, name="signup"),
    path("contribute/", views.contribute, name="contribute"),
    path("drafts/<int:job_id>/", views.draft_detail, name="draft_detail"),
    path("drafts/<int:job_id>/evidence/", views.draft_add_urls, name="draft_add_urls"),
    path("drafts/<int:job_id>/draft/", views.draft_request, name="draft_request"),
    path("drafts/<int:job_id>/discard/", views.draft_discard, name="draft_discard"),
    path("drafts/<int:job_id>/find-evidence/", views.automation_start, name="automation_start"),
    path("drafts/<int:job_id>/text/", views.draft_text_save, name="draft_text_save"),
    path("drafts/<int:job_id>/submit/", views.note_submit, name="note_submit"),
    path("drafts/<int:job_id>/preflight/", views.note_preflight, name="note_preflight"),
    path("snippets/<int:snippet_id>/context/", views.snippet_context, name="snippet_context"),
    path("snippets/<int:snippet_id>/<str:action>/", views.snippet_action, name="snippet_action"),
    path("me/notes/", views.my_notes, name="my_notes"),
    path("me/notes/<int:note_id>/", views.my_note_detail, name="my_note_detail"),
    path("rate/", views.rating_queue, name="rating_queue"),
    path("rate/<int:note_id>/", views.rate_note, name="rate_note"),
    path("scoring/", scoring.scoring_page, name="scoring"),
    path("scoring/rescore/", scoring.rescore, name="rescore"),
    path("supernotes/stuck/", supernotes.stuck_posts, name="stuck_posts"),
    path("supernotes/evaluation/", supernotes.supernote_evaluation, name="supernote_evaluation"),
    path("supernotes/posts/<int:post_id>/generate/", supernotes.supernote_generate, name="supernote_generate"),
    path("supernotes/runs/<int:run_id>/", supernotes.supernote_run, name="supernote_run"),
    path("compare/posts/<int:post_id>/", supernotes.comparison_start, name="comparison_start"),
    path("compare/<int:comparison_id>/", supernotes.comparison, name="comparison"),
    path("compare/results/", supernotes.comparison_results, name="comparison_results"),
    path("rate/<int:note_id>/withdraw/", views.rating_withdraw, name="rating_withdraw"),
    path("posts/<int:post_id>/request/", living.request_note, name="request_note"),
    path("requested/", living.request_queue, name="request_queue"),
    path("requested/by-link/", living.request_note_by_link, name="request_note_by_link"),
    path("notes/<int:note_id>/versions/", living.note_versions, name="note_versions"),
    path("me/suggestions/", living.my_suggestions, name="my_suggestions"),
    path(
        "suggestions/<int:suggestion_id>/source/<str:action>/",
        living.suggestion_source_review,
        name="suggestion_source_review",
    ),
    path("revisions/", living.revision_audit, name="revision_audit"),
    path("revisions/<int:run_id>/", living.revision_proposal, name="revision_proposal"),
    path("revisions/<int:run_id>/decide/", living.revision_proposal_decide, name="revision_proposal_decide"),
    path("living/analytics/", living.living_analytics, name="living_analytics"),
]
