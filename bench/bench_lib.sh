# Shell helpers the bench scripts share (source it; it sets nothing else).
now() { date +%s.%N; }
# wait_for SECONDS COMMAND...: true once COMMAND succeeds (looked at every
# $WAIT_FOR_POLL seconds, default 0.05), false after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep "${WAIT_FOR_POLL:-0.05}"
  done
}
