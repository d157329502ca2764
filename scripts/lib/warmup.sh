#!/usr/bin/env bash
# The demo's background warm-up (started by scripts/demo.sh once the app is up): what serving pages
# does not need. Removes var/warmup.running when done, which ends the banner on every page.
# Usage: scripts/lib/warmup.sh PYTHON PAGES_DIR PAGES_PORT
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=$1 PAGES=$2 PAGES_PORT=$3
echo "== warm-up started $(date -u +%H:%M:%S)"
# Each step's measured duration, for the banner of this start and later ones (crowdnotes_site/banners.py):
# var/warmup.step names the running step and its start; var/warmup-steps.tsv gets a line per finished
# step (name, seconds, UTC end, exit status). A step skipped by its marker is not run, so not measured.
step() {
  local name=$1 started=$SECONDS rc
  shift
  printf '%s\t%s\n' "$name" "$(date +%s)" >var/warmup.step
  "$@"
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$((SECONDS - started))" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$rc" >>var/warmup-steps.tsv
  rm -f var/warmup.step
  return $rc
}
# The Supernote jury needs a personalized helpfulness model: trained on the demo's and the imported
# ratings with the model-free hashing embedding and train_phm's default 8 epochs (about 10 s; its AUC and
# training data are shown with every jury score; 20 epochs fit the training notes closer with no better
# held-out AUC, README "Supernotes"). Once per install (delete the marker to retrain); a failure only
# leaves Supernote runs unscored.
# v2: the PHM's format 2 (note features); a model of the earlier format is refused, so it is trained again once.
if [ ! -f var/demo-phm-v2.done ]; then
  step phm $PY manage.py train_phm --embedder hashing-bow-256 && touch var/demo-phm-v2.done \
    || echo "train_phm failed: Supernote runs will write and filter candidates but propose nothing"
fi
# The jury on real posts (`jury_pick`): trained on the real Community Notes folder once per install
# (seconds; delete the marker to retrain); without it jury_pick trains it on first use.
if [ ! -f var/demo-jury-real.done ]; then
  step jury_real $PY manage.py train_jury_real && touch var/demo-jury-real.done \
    || echo "train_jury_real failed: jury_pick will train the jury on first use"
fi
# The helpfulness judge trained on the crowd's real verdicts: the helpfulness stage uses it when no LLM
# is configured (without it, the offline baseline); trained once per install (delete the marker to retrain).
if [ ! -f var/demo-helpfulness-real.done ]; then
  step helpfulness $PY manage.py train_helpfulness_classifier --seeds 0 && touch var/demo-helpfulness-real.done \
    || echo "train_helpfulness_classifier failed: the helpfulness stage uses the offline baseline"
fi
# One offline Supernote run for the demo's stuck post, queued once (the llm worker runs it meanwhile;
# Stuck posts and the post page show it, and its proposal, when there is one, with the blind comparison).
if [ -f var/demo-phm-v2.done ]; then
  step supernote $PY manage.py demo_supernote
fi
# The living note (load_demo leaves it for the jury model): suggestions on the demo note with most
# ratings, one revision decided by the judges and the jury (LLM if configured, else offline), once.
if [ -f var/demo-phm-v2.done ]; then
  step living $PY manage.py demo_living
fi
# The local evidence index behind "Find evidence for me": the real pages of the corpus, with their
# original URLs and titles from the manifest; each proposal opens its copy served on $PAGES_PORT.
# Once per install (extraction and chunking; its measured time is in var/warmup-steps.tsv); later
# runs skip it (delete the marker to re-index).
if [ -d "$PAGES" ] && [ ! -f var/demo-index.done ]; then
  step index $PY manage.py index_documents "$PAGES" --manifest "$PAGES/manifest.tsv" --base-url "http://127.0.0.1:$PAGES_PORT/" \
    && touch var/demo-index.done
fi
# Unpack the embedding model and build its pre-filter table (first run: minutes, with progress),
# so the first snippets need not wait for it; later runs find it in var/models. The cpu worker builds
# the table in slices queued behind people's work (evidence/warmup.py): a person's request goes
# first, and a match meanwhile ranks passages without the table rather than building it again.
step embedding $PY manage.py evidence_warmup --in-slices
status=$?
# How long it took, for the banner of the next start ("the last warm-up of this install took N minutes").
echo "$SECONDS" >var/warmup.last-seconds
rm -f var/warmup.running
echo "== warm-up finished $(date -u +%H:%M:%S) (exit $status)"
# The benchmark on the demo dataset is not run here: load_demo queued it, and a worker runs it (resumable,
# in slices behind people's work) once this warm-up has indexed the pages; /judging/benchmark/ shows its progress.
exit $status
