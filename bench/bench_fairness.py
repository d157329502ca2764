"""Fairness of the LLM queue: whose LLM calls come first when an admin's two Supernote runs are going
and another contributor asks for a pre-flight.

Run (PostgreSQL + Redis required; uses its own database, which it wipes, and flushes the Redis db):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cn_fairness_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        flock /tmp/heavy.lock .venv/bin/python bench/bench_fairness.py [--llm-seconds 1] [--ask-after 2.4]

Set-up: a loopback OpenAI-compatible LLM stand-in that answers every call after `--llm-seconds` and
logs the order the calls arrive in; one real Celery worker on the `llm` queue (solo pool, as the
tests' worker); "admin2" (Admin) starts Supernote runs on two stuck posts (settings' slice size,
SUPERNOTE_SLICE_CANDIDATES, default 5; no PHM, so only candidates are written and checked); `--ask-after`
seconds later "cora" (Contributor), who has added `--evidence-pages` URLs to her draft meanwhile (they
wait on the cpu queue: no cpu worker here), asks for a pre-flight (3 judge calls). New posts' topic
classification is off (it would add unrelated LLM calls).

Printed: every LLM call until the second run's first call (or `--timeout`), in arrival order (whose
and what, seconds after the runs were started), then the seconds from the pre-flight's request to its
first LLM call and to its completion, and how many calls of each run came before it. The order is
asserted by tests/jobs/test_fair_queue.py (no timing there); the seconds are this script's.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchdb import recreate_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crowdnotes_site.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ["TOPICS_CLASSIFY_NEW_POSTS"] = "0"

RUN_POSTS = ("Alpha claim: vaccines cause autism.", "Bravo claim: vaccines cause autism.")
PREFLIGHT_POST = "Garlic cures flu."


def whose(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(whose, what) of one LLM call: the first run's or the second's candidate writing or principle
    check (a candidate names its run's post), or the pre-flight's judge."""
    text = " ".join(str(m.get("content", "")) for m in messages)
    if "Garlic" in text:
        return "pre-flight", "judge"
    run = "run 1" if "Alpha" in text else "run 2" if "Bravo" in text else "other"
    return run, "write" if "consensus Community Notes" in str(messages[0].get("content", "")) else "check"


def answer(messages: list[dict[str, Any]]) -> str:
    who, what = whose(messages)
    if what == "write":
        name = "Alpha" if who == "run 1" else "Bravo"
        return f"{name}: studies of millions of children found no link between vaccines and autism."
    return "Fine.\nFinal decision: yes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-seconds", type=float, default=1.0, help="the stand-in's time per call")
    parser.add_argument(
        "--ask-after", type=float, default=2.4, help="seconds between the runs' start and the pre-flight"
    )
    parser.add_argument("--evidence-pages", type=int, default=5, help="URLs cora adds meanwhile (cpu queue)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    if "postgres" not in os.environ.get("DATABASE_URL", "") or not os.environ.get("REDIS_URL"):
        sys.exit("set DATABASE_URL (PostgreSQL, a database the bench may wipe) and REDIS_URL (a Redis db it may flush)")
    recreate_database(os.environ["DATABASE_URL"])

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    _measure(args)


def _measure(args: argparse.Namespace) -> None:
    # Project modules load Django models: imported once django.setup() has run.
    from django.conf import settings
    from django.contrib.auth.models import Group, User

    from evidence import snippets
    from judging import services as judging
    from judging.models import PreflightCheck
    from notes.models import DraftJob, Note
    from notes.roles import ADMIN, CONTRIBUTOR
    from notes.services import participant_for_user, post_create
    from notes.supernotes import services as supernotes
    from tests.support.llm_server import Reply, ScriptedLLM
    from tests.support.worker import Worker, purge_broker

    class TimedLLM(ScriptedLLM):
        """The stand-in: every call answered after `llm_seconds`, its arrival logged."""

        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.seconds = seconds
            self.log: list[tuple[float, str, str]] = []

        def _next(self, body: dict[str, Any]) -> Reply:
            reply = super()._next(body)
            with self.lock:
                self.log.append((time.monotonic(), *whose(body.get("messages", []))))
            return Reply(content=reply.content, delay_s=self.seconds)

    def user(name: str, role: str) -> User:
        made = User.objects.create_user(username=name)  # no password: nobody logs in
        made.groups.set(Group.objects.filter(name=role))
        participant_for_user(user=made)
        return made

    admin2, cora = user("admin2", ADMIN), user("cora", CONTRIBUTOR)
    posts = []
    for text in RUN_POSTS:  # stuck: two misleading notes that Need More Ratings
        post = post_create(text=text)
        for k in range(2):
            Note.objects.create(post=post, text=f"Note {k} on {text}")
        posts.append(post)
    job = DraftJob.objects.create(post=post_create(text="Vitamin C cures colds."), contributor=cora)
    purge_broker()

    llm = TimedLLM(args.llm_seconds)
    llm.respond_with(answer)
    worker = Worker(queues="llm", extra_env={"LLM_BASE_URL": llm.base_url, "PHM_DIR": "/nonexistent/no-phm",
                                             "TOPICS_CLASSIFY_NEW_POSTS": "0"}, name="fairness")  # fmt: skip
    try:
        started = time.monotonic()
        runs = [supernotes.supernote_run_start(post=p, user=admin2) for p in posts]
        snippets.snippets_add(job=job, urls=[f"https://example.org/page{i}" for i in range(args.evidence_pages)])
        time.sleep(max(0.0, started + args.ask_after - time.monotonic()))
        asked = time.monotonic()
        check = judging.preflight_request(
            user=cora, post_text=PREFLIGHT_POST, note_text="Trials found garlic does not cure flu.",
            snippets=["Trials found that garlic does not prevent or cure flu."],
        )  # fmt: skip
        done_at = None
        deadline = asked + args.timeout
        while time.monotonic() < deadline:
            if done_at is None and PreflightCheck.objects.filter(pk=check.pk, state__in=("done", "failed")).exists():
                done_at = time.monotonic()
            with llm.lock:
                second_run_called = any(who == "run 2" for _, who, _ in llm.log)
            if done_at is not None and second_run_called:
                break
            time.sleep(0.05)
    finally:
        worker.stop()
        threading.Thread(target=llm.close, daemon=True).start()
    check.refresh_from_db()
    _report(args, llm.log, started, asked, done_at, check.state, [r.pk for r in runs], settings)


def _report(args: argparse.Namespace, log: list[tuple[float, str, str]], started: float, asked: float,
            done_at: float | None, state: str, run_ids: list[int], settings: Any) -> None:  # fmt: skip
    names = {"run 1": f"run {run_ids[0]} (admin2's first)", "run 2": f"run {run_ids[1]} (admin2's second)",
             "pre-flight": "cora's pre-flight"}  # fmt: skip
    print(f"LLM stand-in {args.llm_seconds:g} s per call; slice {settings.SUPERNOTE_SLICE_CANDIDATES} candidates; "
          f"pre-flight asked {asked - started:.1f} s after the runs were started, after {args.evidence_pages} "
          "evidence pages on the cpu queue; one solo worker on the llm queue")  # fmt: skip
    print()
    print("| # | s after start | whose | call |")
    print("|---|---|---|---|")
    for k, (at, who, what) in enumerate(log, 1):
        print(f"| {k} | {at - started:.1f} | {names.get(who, who)} | {what} |")
    first_b = next((k for k, (_, who, _) in enumerate(log) if who == "pre-flight"), None)
    before = log[:first_b] if first_b is not None else log
    counts = {who: sum(1 for _, w, _ in before if w == who) for who in ("run 1", "run 2")}
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| LLM calls before the pre-flight's first | {len(before)} (first run: {counts['run 1']}, "
          f"second run: {counts['run 2']}) |")  # fmt: skip
    print(f"| of them, arrived after the pre-flight was asked | {sum(1 for at, _, _ in before if at >= asked)} |")
    if first_b is not None:
        print(f"| pre-flight's first call, s after it was asked | {log[first_b][0] - asked:.1f} |")
    print(f"| pre-flight {state}, s after it was asked | {'-' if done_at is None else f'{done_at - asked:.1f}'} |")
    second = next((at for at, who, _ in log if who == "run 2"), None)
    if second is not None:
        print(f"| second run's first call, s after the pre-flight was asked | {second - asked:.1f} |")
    print(f"| order (1 = first run, 2 = second run, P = pre-flight) | "
          f"{''.join('P' if who == 'pre-flight' else who[-1] for _, who, _ in log)} |")  # fmt: skip


if __name__ == "__main__":
    main()
