"""Demo of living notes (issue 36), built only through the real services: a request queue, and one
note with suggestions attached to its raters' ratings, revised by a real revision run (the LLM when
configured, else the offline baseline; the judges and the jury decide, so the demo may show a
rejected revision with its reasons), then one more suggestion left pending.

`load_demo` runs it (living_demo_lines): the request queue at once, the living note once a jury
model is stored (the demo's warm-up trains it, then runs `demo_living`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count

from evidence import snippets as evidence_snippets
from evidence.index.services import local_copy_index
from evidence.models import EvidenceSource, Passage, Snippet
from notes.demo import DEMO_CORPUS, corpus_living, demo_pages, quoted_passage
from notes.living import services
from notes.models import Note, Post, Rating, RevisionRun, Suggestion


@dataclass(frozen=True)
class LivingDemo:
    requests: int
    note: Note | None
    run: RevisionRun | None
    why_not: str = ""


def living_demo(*, request_posts: list[Post], note: Note | None) -> LivingDemo:
    """Idempotent: requests exist once per user and post; a note that has suggestions is left as is."""
    users = list(get_user_model().objects.filter(participant__isnull=False).order_by("pk")[:6])
    made = 0
    for k, post in enumerate(request_posts[:3]):
        for user in users[: 3 - k]:  # 3, 2 and 1 requests: the queue's order shows
            made += services.note_request_create(post=post, user=user, reason="seen shared widely").created
    if note is None:
        return LivingDemo(made, None, None, "no demo note with ratings from three raters")
    if Suggestion.objects.filter(note=note).exists():
        return LivingDemo(made, note, note.revision_runs.first(), "the note had suggestions already")
    ratings = list(Rating.objects.filter(note=note, rater__user__isnull=False).select_related("rater__user")[:3])
    if len(ratings) < 3:
        return LivingDemo(made, note, None, "the note has fewer than three raters with a login")
    services.current_version(note)
    passage = _suggested_passage(note)
    first = services.suggestion_add(rating=ratings[0], text="Add the finding from this source.",
                                    source_url=passage[0] if passage else "")  # fmt: skip
    suggester = ratings[0].rater.user
    if passage is not None and first.snippet is not None and suggester is not None:
        # The page is a local copy of a real page, indexed: the suggester's snippet takes the passage of
        # it the suggestion rests on, as the pipeline's match would, and the suggester confirms it.
        _, source, chosen, start, end = passage
        Snippet.objects.filter(pk=first.snippet.pk).update(
            state=Snippet.State.READY, source=source, passage=chosen, sentence_start=start, sentence_end=end
        )
        first.snippet.refresh_from_db()
        evidence_snippets.snippet_review(snippet=first.snippet, user=suggester, confirmed=True)
    services.suggestion_add(rating=ratings[1], text="Shorter sentences would read better.")
    run = services.revision_run_start(note=note)
    if run is not None:
        services.revision_run_execute(run_id=run.pk)
        run.refresh_from_db()
    note.refresh_from_db()
    third = Rating.objects.filter(note=note, rater=ratings[2].rater).first()
    if third is None:  # a published revision retired the ratings: the third rater rates the new version
        from notes.services import rating_submit

        third, _ = rating_submit(rater=ratings[2].rater, note=note, level="SOMEWHAT_HELPFUL")
    services.suggestion_add(rating=third, text="Also mention when the guidance was last updated.")
    return LivingDemo(made, note, run)


def _suggested_passage(note: Note) -> tuple[str, EvidenceSource, Passage, int | None, int | None] | None:
    """(URL, source, passage, highlighted sentence's start and end) the first suggester adds: the corpus
    demo's living source (the passage of a local copy of a real page holding its quote, the quote
    highlighted), else the note's own first confirmed snippet; None without either."""
    living = corpus_living(DEMO_CORPUS)
    if living is not None and note.external_id == living[0]:
        url, quote = living[1]
        folder, manifest = demo_pages()
        source = local_copy_index(url=url, folder=folder, manifest=manifest,
                                  base_url=settings.EVIDENCE_LOCAL_COPIES_URL)  # fmt: skip
        return (url, source, *quoted_passage(source, quote))
    own = Snippet.objects.filter(note=note, passage__isnull=False).select_related("passage", "source").first()
    if own is None or own.source is None or own.passage is None:
        return None
    return own.url, own.source, own.passage, own.sentence_start, own.sentence_end


def demo_living_choice() -> tuple[list[Post], Note | None]:
    """The demo's posts without notes (requests), and its note with the most ratings."""
    posts: list[Post] = list(
        Post.objects.filter(is_demo=True).annotate(n=Count("notes")).filter(n=0).order_by("pk")[:3]
    )
    if len(posts) < 3:
        posts = list(Post.objects.filter(is_demo=True).order_by("-pk")[:3])
    living = corpus_living(DEMO_CORPUS)
    chosen = Note.objects.filter(is_demo=True, external_id=living[0]).first() if living else None
    if chosen is not None:
        return posts, chosen
    note: Note | None = (
        Note.objects.filter(is_demo=True, post__text_available=True)
        .exclude(origin=Note.Origin.SUPERNOTE)
        .annotate(n=Count("ratings"))
        .filter(n__gte=3)
        .order_by("-n", "pk")
        .first()
    )
    return posts, note


def jury_model_stored() -> bool:
    """Whether a personalized helpfulness model is stored (the jury needs one to decide a revision)."""
    from notes.supernotes import phm  # torch: commands and workers only
    from notes.supernotes.services import phm_dir

    return phm.latest(phm_dir()) is not None


def living_demo_lines(*, wait_for_jury: bool) -> list[str]:
    """Run the living demo on the demo's choice and say what it did. With `wait_for_jury`, the
    living note is left for later while no jury model is stored (its revision could only be
    rejected for want of one); the request queue is made either way."""
    posts, note = demo_living_choice()
    waiting = (
        wait_for_jury and note is not None and not Suggestion.objects.filter(note=note).exists()
        and not jury_model_stored()
    )  # fmt: skip
    done = living_demo(request_posts=posts, note=None if waiting else note)
    lines = [f"Living notes: {done.requests} note request(s) added (the Requested page, /requested/)."]
    if waiting:
        lines.append("Living note: waits for a jury model (train_phm; the demo's warm-up trains one, then runs "
                     "demo_living).")  # fmt: skip
    elif done.why_not:
        lines.append(f"Living note: {done.why_not}.")
    if done.run is not None:
        lines.append(f"Revision run {done.run.pk} of note {done.run.note_id}: {done.run.reasons}")
    return lines
