# Process management for scripts/demo.sh (sourced). Every long-running child gets its own process
# group (setsid), so stopping it stops what it started too (runserver's reloader, a worker's
# pool); Ctrl-C, SIGTERM and any exit (also a failed step) stop them all: TERM, then KILL after 10 s.

PROCS_PIDS=()

# procs_start LOG CMD...: start CMD in the background in its own process group, output to LOG.
procs_start() {
  local log=$1
  shift
  # Emptied here, before the child starts: a `tail -f` started right after never reads the last run's lines.
  : >"$log"
  setsid "$@" >>"$log" 2>&1 &
  PROCS_PIDS+=("$!")
}

# procs_run CMD...: run a preparation step in the foreground; Ctrl-C and SIGTERM still stop it.
# (bash runs a trap only after a foreground command ends; `wait` is interrupted at once.) A step
# that runs longer says so every PROCS_TICK_S seconds (10), so set-up is never silent for minutes.
procs_run() {
  "$@" &
  local pid=$! start=$SECONDS last=$SECONDS
  PROCS_PIDS+=("$pid")
  # The one-second tick is a builtin `read -t` on a FIFO nobody writes, not a waited `sleep` child:
  # when SIGINT came while bash waited for such a child (which ignores SIGINT, being in the
  # background), bash could take the child's normal exit to mean the child handled Ctrl-C and drop
  # the signal, so the trap never ran (tests/jobs/test_demo_processes.py, intermittently).
  local tick
  tick=$(mktemp -u)
  mkfifo "$tick"
  exec {PROCS_TICK_FD}<>"$tick"
  rm -f "$tick"
  while kill -0 "$pid" 2>/dev/null; do
    read -r -t 1 -u "$PROCS_TICK_FD" || true
    if kill -0 "$pid" 2>/dev/null && ((SECONDS - last >= ${PROCS_TICK_S:-10})); then
      last=$SECONDS
      echo "   … still running after $((SECONDS - start)) s: ${*:1:4}" >&2
    fi
  done
  exec {PROCS_TICK_FD}<&-
  wait "$pid"
}

_procs_signal() {
  local sig=$1 pid
  for pid in "${PROCS_PIDS[@]}"; do
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null || true
  done
}

_procs_alive() {
  local pid
  for pid in "${PROCS_PIDS[@]}"; do
    if kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null; then return 0; fi
  done
  return 1
}

procs_stop() {
  trap - EXIT INT TERM
  [ "${#PROCS_PIDS[@]}" -eq 0 ] && return 0
  echo "Stopping ${#PROCS_PIDS[@]} process(es) the demo started…" >&2
  _procs_signal TERM
  local i
  for i in $(seq 1 50); do
    _procs_alive || break
    sleep 0.2
  done
  _procs_signal KILL
  PROCS_PIDS=()
}

procs_trap() {
  trap procs_stop EXIT
  trap 'procs_stop; exit 130' INT
  trap 'procs_stop; exit 143' TERM
}
