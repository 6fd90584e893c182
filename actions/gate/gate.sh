#!/usr/bin/env bash
# opsbot's sweep gate as a workflow step (actions/gate/action.yml runs it).
#
# It asks the opsbot server (POST /api/v1/gate, Accept: text/plain) whether
# this push may skip its benchmark sweep, and writes the eight step outputs
# to $GITHUB_OUTPUT. It fails closed: whatever goes wrong, it answers
# skip-pr-sweep=false, and the sweep runs. A setup mistake (the server
# refused the ask: a wrong token or audience, a wrong URL, a missing
# permission) fails the step with an ::error::, so it is seen; a server or
# GitHub that did not answer within the timeout is a ::warning:: and the step
# succeeds (OPSBOT_STRICT=true fails it too).
#
# Inputs, all through the environment (never interpolated into the script):
#   OPSBOT_SERVER    the server's base URL (required)
#   OPSBOT_TOKEN     a gate token; empty: a GitHub Actions OIDC ID token
#   OPSBOT_TIMEOUT   seconds for the whole ask, retries included (default 60)
#   OPSBOT_AUDIENCE  the OIDC audience (default: OPSBOT_SERVER, without a trailing /)
#   OPSBOT_STRICT    "true": a decision that could not be had in time fails the step too
# and GitHub's: GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_REPOSITORY,
# GITHUB_OUTPUT, ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN.
#
# It needs bash (3.2 or later), curl and jq. jq is on every GitHub-hosted
# runner image (Ubuntu, Windows, macOS); it reads the event payload and
# builds the request body, which bash alone cannot do safely. A runner
# without it fails closed, with a warning that says so.
set -uo pipefail

OUTPUTS=(skip-pr-sweep reuse-enabled reuse-source-run-id reuse-source-run-attempt
  reuse-source-run-url reuse-source-pr-number reuse-source-head-sha reuse-reason)
VALUES=("" "" "" "" "" "" "" "") # VALUES[i] is OUTPUTS[i]'s value

# set_value sets the output named $1 to $2; other names are ignored.
set_value() {
  local i
  for i in "${!OUTPUTS[@]}"; do
    if [ "${OUTPUTS[$i]}" = "$1" ]; then VALUES[i]=$2; fi
  done
}

work=$(mktemp -d) || { echo "::error::opsbot gate: cannot make a temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT

# now_ms is the time in milliseconds (whole seconds where bash < 5).
now_ms() {
  if [ -n "${EPOCHREALTIME:-}" ]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((10#$t / 1000))
  else
    echo $(($(date +%s) * 1000))
  fi
}

# escape_data escapes a workflow command's message (%, CR, LF).
escape_data() {
  local s=${1//'%'/'%25'}
  s=${s//$'\r'/'%0D'}
  printf '%s' "${s//$'\n'/'%0A'}"
}

# one_line keeps a value on one output line, holding no workflow command:
# the runner reads ::command:: at a line's start and its legacy parser
# ##[command] anywhere in a line, and server text may quote names others
# chose (a file name in a PR). Every ##[ becomes "# #[", every :: ": :".
one_line() {
  local s=${1//$'\r'/ }
  s=${s//$'\n'/ }
  while [[ $s == *'##['* || $s == *'::'* ]]; do
    s=${s//'##['/'# #['}
    s=${s//'::'/': :'}
  done
  printf '%s' "$s"
}

# emit writes the eight outputs, in order, to stdout and $GITHUB_OUTPUT.
emit() {
  local i lines=""
  for i in "${!OUTPUTS[@]}"; do
    lines+="${OUTPUTS[$i]}=$(one_line "${VALUES[$i]}")"$'\n'
  done
  printf '%s' "$lines"
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    if ! printf '%s' "$lines" >>"$GITHUB_OUTPUT"; then
      echo "::error::opsbot gate could not write the step outputs to $(escape_data "$GITHUB_OUTPUT")"
      exit 1
    fi
  fi
}

# sweep_because answers "sweep" with the cause and ends the step: with a
# ::warning:: and success ($1 warn), or with an ::error:: and failure ($1
# error), so that a mistake in the setup shows as a red step. Either way the
# outputs say skip-pr-sweep=false and the sweep runs.
sweep_because() {
  local level=$1 cause
  cause=$(one_line "$2")
  if [ "$level" = error ]; then
    echo "::error::opsbot gate was refused, so the sweep runs (and every push will sweep until this is fixed): $(escape_data "$cause")"
  else
    echo "::warning::opsbot gate could not get a decision, so the sweep runs: $(escape_data "$cause")"
  fi
  VALUES=("" "" "" "" "" "" "" "")
  set_value skip-pr-sweep false
  set_value reuse-enabled false
  set_value reuse-reason "opsbot gate failed: $cause"
  emit
  [ "$level" = error ] && exit 1
  exit 0
}

# fail_closed is a failure that may pass (the server or GitHub did not
# answer in time): a warning, or with the strict input an error.
fail_closed() {
  if [ "${OPSBOT_STRICT:-false}" = true ]; then sweep_because error "$1"; fi
  sweep_because warn "$1"
}

# refused is a failure that will not pass by itself (a wrong token or
# audience, a wrong server URL, a missing permission): an error.
refused() { sweep_because error "$1"; }

for tool in curl jq; do
  command -v "$tool" >/dev/null 2>&1 || refused "$tool is not installed on this runner (the action needs bash, curl and jq)"
done

server=${OPSBOT_SERVER:-}
server=${server%/}
[ -n "$server" ] || refused "the server input is empty (set it to the opsbot URL, e.g. \${{ vars.OPSBOT_URL }})"
# The bearer goes only over TLS; plain http only to this machine (tests, a
# sidecar).
# The authority (between :// and the path) may hold no userinfo: in
# http://127.0.0.1:443@elsewhere the host is elsewhere.
authority=${server#*://}
authority=${authority%%[/?#]*}
case "$authority" in
*@*) refused "the server input \"$server\" names a user (an @ in its host part): give the server's plain https:// URL" ;;
esac
case "$server" in
https://?*) ;;
http://127.0.0.1 | http://127.0.0.1[:/]* | http://localhost | http://localhost[:/]* | http://\[::1\] | http://\[::1\][:/]*) ;;
*) refused "the server input \"$server\" is not an https:// URL (plain http is taken only for 127.0.0.1, localhost and [::1])" ;;
esac
timeout=${OPSBOT_TIMEOUT:-60}
[[ $timeout =~ ^[0-9]+$ ]] && [ "$timeout" -gt 0 ] || refused "the timeout input \"$timeout\" is not a positive number of seconds"
# The ID token's audience: the input, else the server's URL itself, which
# is what api.github_oidc.audience is set to (README, "Connect a repository").
audience=${OPSBOT_AUDIENCE:-$server}
deadline=$(($(now_ms) + timeout * 1000))

# --- what is asked, from the event that started the workflow ----------------
event=${GITHUB_EVENT_NAME:-}
[ -n "${GITHUB_EVENT_PATH:-}" ] && [ -r "$GITHUB_EVENT_PATH" ] ||
  refused "no event payload to read (GITHUB_EVENT_PATH is \"${GITHUB_EVENT_PATH:-}\")"
case "$event" in
pull_request)
  filter='[.repository.full_name // "", (.pull_request.number // 0 | tostring), .pull_request.head.sha // "", .action // ""]'
  ;;
push)
  filter='[.repository.full_name // "", "0", .after // "", ""]'
  ;;
merge_group)
  # The group's branch names its PR; the server reads the rest from GitHub.
  filter='[.repository.full_name // "", "0", .merge_group.head_sha // "", .merge_group.head_ref // ""]'
  ;;
*)
  refused "the workflow ran on \"$event\": the gate answers pull_request, push and merge_group events"
  ;;
esac
# Fields are joined with the unit separator, not a tab: read collapses runs
# of whitespace separators, which would shift a field after an empty one.
if ! fields=$(jq -r "$filter | map(gsub(\"[\\u001f\\n\\r]\"; \" \")) | join(\"\\u001f\")" "$GITHUB_EVENT_PATH" 2>"$work/jq.err"); then
  refused "cannot read the event payload $GITHUB_EVENT_PATH: $(head -c 300 "$work/jq.err")"
fi
IFS=$'\x1f' read -r repo pr sha action <<<"$fields"
ref=""
if [ "$event" = merge_group ]; then ref=$action action=""; fi
repo=${repo:-${GITHUB_REPOSITORY:-}}
[ -n "$repo" ] || refused "the event names no repository"
[[ $sha =~ ^0*$ ]] && fail_closed "the $event event names no commit"
if [ "$event" = pull_request ] && [ "$pr" -le 0 ] 2>/dev/null; then
  fail_closed "the pull_request event names no pull request number"
fi
jq -n --arg repo "$repo" --argjson pr "$pr" --arg sha "$sha" --arg event "$event" --arg action "$action" --arg ref "$ref" \
  '{repo: $repo, pr: $pr, sha: $sha, event: $event, action: $action} + (if $ref == "" then {} else {ref: $ref} end)' >"$work/ask.json" ||
  fail_closed "cannot build the request from the event"

# --- retries ---------------------------------------------------------------
# attempt runs curl once into $work/body (headers into $work/headers) and
# sets status (000 when no HTTP answer came) and cause.
attempt() {
  local left=$(((deadline - $(now_ms) + 999) / 1000))
  [ "$left" -ge 1 ] || left=1
  rm -f "$work/body" "$work/headers"
  # -q first: no ~/.curlrc on the runner adds headers, hosts or options to
  # the ask. Redirects are not followed (no -L): the bearer stays here.
  status=$(curl -q -sS --proto =https,http --max-time "$((left < 30 ? left : 30))" -o "$work/body" -D "$work/headers" -w '%{http_code}' "$@" 2>"$work/curl.err")
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    status=000
    cause="no answer from the server: $(head -c 300 "$work/curl.err" | tr '\n' ' ')"
  else
    # An opsbot error body is the eight outputs with the reason in
    # reuse-reason; anything else is shown as it came.
    local said
    said=$(sed -n 's/^reuse-reason=//p' "$work/body" 2>/dev/null | head -n 1)
    [ -n "$said" ] || said=$(head -c 300 "$work/body" | tr '\r\n' '  ')
    cause="the server answered HTTP $status: $said"
  fi
}

# with_retries calls attempt until an answer that is not a connection error,
# a 5xx or a 429, backing off (1, 2, 4, 8, 10, 10 ... s, or Retry-After)
# while the budget lasts. what names the request in the log.
with_retries() {
  local what=$1 wait=1 n=1 after
  shift
  while :; do
    attempt "$@"
    case "$status" in
    000 | 429 | 5??) ;;
    *) return 0 ;;
    esac
    after=$(tr -d '\r' <"$work/headers" 2>/dev/null | sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9][0-9]*\)$/\1/p' | tail -n 1)
    # A Retry-After too large for the arithmetic is an hour; the budget
    # below cuts it further.
    while [ "${#after}" -gt 1 ] && [ "${after#0}" != "$after" ]; do after=${after#0}; done
    if [ "${#after}" -gt 4 ] || { [ -n "$after" ] && [ "$after" -gt 3600 ]; }; then after=3600; fi
    local pause=$((10#${after:-$wait} * 1000))
    local left=$((deadline - $(now_ms)))
    if [ "$left" -le 0 ]; then
      fail_closed "$what: gave up after $n attempts in ${timeout}s; last: $cause"
    fi
    [ "$pause" -le "$left" ] || pause=$left
    pause=$(printf '%d.%03d' $((pause / 1000)) $((pause % 1000)))
    echo "opsbot gate: $what, attempt $n: $(one_line "$cause"); retrying in ${pause}s"
    sleep "$pause"
    n=$((n + 1))
    wait=$((wait * 2 > 10 ? 10 : wait * 2))
  done
}

# --- the bearer: the token input, or an OIDC ID token ---------------------
umask 077
if [ -n "${OPSBOT_TOKEN:-}" ]; then
  bearer=$OPSBOT_TOKEN
elif [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] && [ -n "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ]; then
  sep='?'
  case "$ACTIONS_ID_TOKEN_REQUEST_URL" in *'?'*) sep='&' ;; esac
  aud=$(jq -rn --arg a "$audience" '$a | @uri')
  printf 'Authorization: bearer %s\n' "$ACTIONS_ID_TOKEN_REQUEST_TOKEN" >"$work/oidc-headers"
  with_retries "requesting an OIDC ID token" -H "@$work/oidc-headers" "$ACTIONS_ID_TOKEN_REQUEST_URL$sep""audience=$aud"
  [ "$status" = 200 ] || refused "GitHub refused an OIDC ID token: $cause (does the job have permissions: id-token: write?)"
  bearer=$(jq -r '.value // empty' "$work/body" 2>/dev/null)
  [ -n "$bearer" ] || refused "GitHub's OIDC answer held no token"
else
  refused "no token: set the action's token input, or give the job permissions: id-token: write"
fi
echo "::add-mask::$bearer"

# --- the ask ---------------------------------------------------------------
printf 'Authorization: Bearer %s\nAccept: text/plain\nContent-Type: application/json\n' "$bearer" >"$work/ask-headers"
with_retries "asking $server" -X POST -H "@$work/ask-headers" --data-binary "@$work/ask.json" "$server/api/v1/gate"
case "$status" in
200) ;;
401)
  if [ -n "${OPSBOT_TOKEN:-}" ]; then
    refused "$cause (the action's token input is not one of the server's gate tokens, api.gate_tokens_env)"
  fi
  refused "$cause (the job's ID token was refused: its audience was \"$audience\"; the server's api.github_oidc.audience must be exactly that, or pass the action's audience input; or set the action's token input to a gate token)"
  ;;
*) refused "$cause" ;;
esac

while IFS= read -r line || [ -n "$line" ]; do
  line=${line%$'\r'}
  case "$line" in *=*) ;; *) continue ;; esac
  k=${line%%=*}
  set_value "$k" "${line#*=}"
done <"$work/body"
case "${VALUES[0]}" in
true | false) ;;
*) refused "the server's answer has no skip-pr-sweep=true|false line (is $server an opsbot with the text/plain gate?)" ;;
esac
emit
