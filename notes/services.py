from __future__ import annotations

import hashlib
import re

from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction

from notes.models import Participant, Post


def normalize_post_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def post_text_hash(text: str) -> str:
    return hashlib.sha256(normalize_post_text(text).encode()).hexdigest()


def participant_for_user(*, user: AbstractBaseUser) -> Participant:
    """The scoring identity of an app user, created on first use."""
    participant, _ = Participant.objects.get_or_create(user=user, defaults={"external_id": f"user-{user.pk}"})
    return participant


@transaction.atomic
def user_signup(*, username: str, password: str, email: str, roles: list[str]) -> AbstractBaseUser:
    """Create an account in the chosen roles (Contributor and/or Rater)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=password, email=email)
    user.groups.set(Group.objects.filter(name__in=roles))
    participant_for_user(user=user)
    return user


@transaction.atomic
def post_create(
    *,
    text: str,
    flagged_by: AbstractBaseUser | None = None,
    source_url: str = "",
    author_handle: str = "",
    **extra: object,
) -> Post:
    return Post.objects.create(
        text=text,
        text_hash=post_text_hash(text),
        flagged_by=flagged_by,
        source_url=source_url,
        author_handle=author_handle,
        **extra,
    )
