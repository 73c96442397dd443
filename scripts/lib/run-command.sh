# run-command.sh: sourced by the with-*.sh scripts once their service is up.
#
# run_command SERVICE CMD [ARGS...] runs CMD in the background, in a process
# group of its own (set -m), so that a TERM, INT or HUP (a CI timeout)
# reaches it and everything it started (go test's test binaries) at once,
# and the calling script's EXIT trap still stops SERVICE on the way out. A
# signal before the command has started exits at once. The command's stdin
# is kept closed, as for any background job. It exits with the command's
# own status. The caller defines log().

run_command() {
  local service=$1
  shift
  child=
  forward() {
    if [ -z "$child" ]; then exit "$1"; fi
    kill -TERM -- "-$child" 2>/dev/null || true
  }
  trap 'forward 143' TERM
  trap 'forward 130' INT
  trap 'forward 129' HUP
  set -m
  "$@" </dev/null &
  child=$!
  set +m
  local status=0
  while kill -0 "$child" 2>/dev/null; do
    wait "$child" && status=0 || status=$? # a forwarded signal may interrupt wait
  done
  wait "$child" && status=0 || status=$? # the command's own status, once it is gone
  log "stopping $service (command exited $status)"
  exit "$status"
}
