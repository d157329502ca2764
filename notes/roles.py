"""The three roles and their permissions. The data migration and the tests both read this."""

from __future__ import annotations

from typing import Any

CONTRIBUTOR = "Contributor"
RATER = "Rater"
ADMIN = "Admin"
# Contributors an admin marks as AI Note Writers for X (xnotes: propose a note to X).
X_WRITER = "X writer"
# Contributors an admin trusts with costly work: with SUPERNOTES_OPEN_TO_TRUSTED=1 they may start
# Supernote runs (notes.supernotes.services.supernote_may_start). The group holds no permission.
TRUSTED = "Trusted contributor"

ROLE_PERMISSIONS: dict[str, list[str]] = {
    CONTRIBUTOR: [
        "notes.add_post",
        "notes.add_note",
        "notes.add_draftjob",
        "notes.change_draftjob",
        "notes.view_draftjob",
        "evidence.add_snippet",
        "evidence.change_snippet",
    ],
    RATER: [
        "notes.add_rating",
        "notes.change_rating",
        # The blind comparison of a Supernote with the best existing note (crowdnotes_site/lib/communitynotes/supernotes/comparison.py).
        "notes.add_supernotecomparison",
    ],
    # Admins audit and moderate: every permission of the apps.
    ADMIN: ["notes.*", "evidence.*", "judging.*", "xnotes.*"],
    X_WRITER: ["xnotes.propose_xnote"],
    # Supernote runs (~300 LLM calls each) are admins' by default; see TRUSTED above.
    TRUSTED: [],
}

SIGNUP_ROLES = (CONTRIBUTOR, RATER)


def sync_roles(apps: Any) -> None:
    """Create the role groups and give each exactly its permissions (idempotent)."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = Permission.objects.none()
        for perm in perms:
            app_label, codename = perm.split(".", 1)
            query = Permission.objects.filter(content_type__app_label=app_label)
            wanted = wanted | (query if codename == "*" else query.filter(codename=codename))
        group.permissions.set(wanted)
