"""Demo of living notes, built only through the real services: a request queue, and one note whose
raters suggest changes with their ratings. Each round is a real revision run (the LLM when
configured, else the offline baseline); the checks, the judges and the jury decide whether it is
proposed, and the note's author decides on a proposal: the corpus declines the first and accepts the
second (so the demo shows both), then one more suggestion is left pending.

`load_demo` runs it (living_demo_lines): the request queue at once, the living note once a jury
model is stored (the demo's warm-up trains it, then runs `demo_living`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count

from crowdnotes_site.lib.communitynotes.supernotes import phm
from evidence import snippets as evidence_snippets
from evidence.index.services import local_copy_index
from evidence.models import EvidenceSource, Passage, Snippet
from notes.demo import (
    DEMO_CORPUS,
    DEMO_PASSWORD,
    LivingRound,
    attach_login,
    corpus_living,
    demo_pages,
    quoted_passage,
)
from notes.living import services
from notes.models import Note, Participant, Post, Rating, RevisionRun, Suggestion
from notes.roles import CONTRIBUTOR
from notes.services import rating_submit
from notes.supernotes.services import phm_dir

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# The wording suggestion of the first round: a revision that does not take up its words tells its
# suggester "not used".
WORDING = "Shorter sentences would read better."


@dataclass(frozen=True)
class LivingDemo:
    requests: int
    note: Note | None
    runs: list[RevisionRun] = field(default_factory=list)
    why_not: str = ""
    decider: str = ""


def living_demo(*, request_posts: list[Post], note: Note | None) -> LivingDemo:
    """Idempotent: requests exist once per user and post; a note that has suggestions is left as is."""
    users = list(get_user_model().objects.filter(participant__isnull=False).order_by("pk")[:6])
    made = 0
    for k, post in enumerate(request_posts[:3]):
        for user in users[: 3 - k]:  # 3, 2 and 1 requests: the queue's order shows
            made += services.note_request_create(post=post, user=user, reason="seen shared widely").created
    if note is None:
        return LivingDemo(made, None, why_not="no demo note with ratings from three raters")
    if Suggestion.objects.filter(note=note).exists():
        return LivingDemo(made, note, list(note.revision_runs.order_by("pk")), "the note had suggestions already")
    ratings = list(Rating.objects.filter(note=note, rater__user__isnull=False).select_related("rater__user")[:3])
    if len(ratings) < 3:
        return LivingDemo(made, note, why_not="the note has fewer than three raters with a login")
    services.current_version(note)
    decider = _decider(note)
    runs = []
    for k, round_ in enumerate(_rounds(note)):
        _suggest_from_page(_rating_of(note, ratings[round_.rater].rater), round_)
        if k == 0:
            services.suggestion_add(rating=_rating_of(note, ratings[1].rater), text=WORDING)
        run = services.revision_run_start(note=note)
        if run is None:
            break
        services.revision_run_execute(run_id=run.pk)
        run.refresh_from_db()
        if run.outcome == RevisionRun.Outcome.PROPOSED and decider is not None and round_.decision != "wait":
            run = services.revision_proposal_decide(run_id=run.pk, user=decider, accept=round_.decision == "accept",
                                                    reason=round_.reason)  # fmt: skip
        runs.append(run)
        note.refresh_from_db()
        if run.outcome not in (RevisionRun.Outcome.DECLINED, RevisionRun.Outcome.PUBLISHED):
            break  # the next round starts only after a person decided this one
    # One more suggestion, on the current version, left pending.
    services.suggestion_add(rating=_rating_of(note, ratings[2].rater),
                            text="Also mention when the guidance was last updated.")  # fmt: skip
    return LivingDemo(made, note, runs, decider=decider.get_username() if decider else "")


def _rating_of(note: Note, rater: Participant) -> Rating:
    """The rater's rating of the note's current version (an accepted revision retired their rating
    of the one before: they rate the new one)."""
    rating = Rating.objects.filter(note=note, rater=rater).first()
    if rating is None:
        rating, _ = rating_submit(rater=rater, note=note, level="SOMEWHAT_HELPFUL")
    return rating


def _decider(note: Note) -> User | None:
    """Who decides on the living note's revisions: its author, given the corpus's login; else an
    admin (the public sample's notes have authors without accounts)."""
    living = corpus_living(DEMO_CORPUS)
    if living is not None and note.external_id == living.note_id and note.author is not None:
        attach_login(living.author, note.author, role=CONTRIBUTOR)
        note.refresh_from_db()
    author = services.proposal_decider(note)
    if author is not None:
        return author
    return get_user_model().objects.filter(username="demo-admin").first()


def _rounds(note: Note) -> list[LivingRound]:
    """The corpus's rounds for its living note; for another note, one round from its own first
    confirmed passage, accepted if proposed."""
    living = corpus_living(DEMO_CORPUS)
    if living is not None and note.external_id == living.note_id:
        return list(living.rounds)
    own = Snippet.objects.filter(note=note, passage__isnull=False).select_related("passage").first()
    if own is None or own.passage is None:
        return []
    return [LivingRound(0, "Add the finding from this source.", own.url, own.passage.text, "accept", "")]


def _suggest_from_page(rating: Rating, round_: LivingRound) -> Suggestion:
    """The rater suggests with a source; the pipeline's match is the passage of the page's local
    copy that holds the round's quote (highlighted), and the suggester confirms it."""
    suggestion = services.suggestion_add(rating=rating, text=round_.suggestion, source_url=round_.url)
    passage = _quoted(round_)
    suggester = rating.rater.user
    if passage is None or suggestion.snippet is None or suggester is None:
        return suggestion
    source, chosen, start, end = passage
    Snippet.objects.filter(pk=suggestion.snippet.pk).update(
        state=Snippet.State.READY, source=source, passage=chosen, sentence_start=start, sentence_end=end
    )
    suggestion.snippet.refresh_from_db()
    evidence_snippets.snippet_review(snippet=suggestion.snippet, user=suggester, confirmed=True)
    return suggestion


def _quoted(round_: LivingRound) -> tuple[EvidenceSource, Passage, int | None, int | None] | None:
    """(source, passage, highlighted sentence's start and end) holding the round's quote: from the
    local copy of a real page for the corpus's rounds, else the note's own indexed source."""
    existing = EvidenceSource.objects.filter(url=round_.url).first()
    if existing is None:
        folder, manifest = demo_pages()
        existing = local_copy_index(url=round_.url, folder=folder, manifest=manifest,
                                    base_url=settings.EVIDENCE_LOCAL_COPIES_URL)  # fmt: skip
    if existing is None:
        return None
    return (existing, *quoted_passage(existing, round_.quote))


def demo_living_choice() -> tuple[list[Post], Note | None]:
    """The demo's posts without notes (requests), and its note with the most ratings."""
    posts: list[Post] = list(
        Post.objects.filter(is_demo=True).annotate(n=Count("notes")).filter(n=0).order_by("pk")[:3]
    )
    if len(posts) < 3:
        posts = list(Post.objects.filter(is_demo=True).order_by("-pk")[:3])
    living = corpus_living(DEMO_CORPUS)
    chosen = Note.objects.filter(is_demo=True, external_id=living.note_id).first() if living else None
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
    for run in done.runs:
        decision = ""
        if run.decided_by is not None:
            decision = f" {run.get_outcome_display()} by {run.decided_by.get_username()}"
            decision += f": {run.decision_reason}" if run.decision_reason else "."
        lines.append(f"Revision run {run.pk} of note {run.note_id}: {run.reasons}{decision}")
    if done.decider and done.decider != "demo-admin":
        lines.append(f"The living note's author decides on its revisions: login {done.decider} / {DEMO_PASSWORD}.")
    return lines
