#!/usr/bin/env bash
# The memlint GitHub Action's step (action.yml runs it; tests/test_action.py runs it locally).
#
# Inputs come as environment variables: MEMLINT (the command, default `memlint`), MEMLINT_PATHS
# (space-separated files or directories, default "."), MEMLINT_ARGS (extra arguments for
# `memlint check`, e.g. "--world-size 64 --gpu H100-80GB"), MEMLINT_SARIF (a file to write SARIF
# to, empty for none), MEMLINT_SUMMARY ("true": append the Markdown report to
# $GITHUB_STEP_SUMMARY). It prints workflow annotations, and writes the check's exit code to
# $GITHUB_OUTPUT as exit-code (the action fails the job on it after the SARIF upload).
#
# GitHub drops a step's job summary whole when it exceeds 1 MiB, so the Markdown report is cut
# at a line below MEMLINT_SUMMARY_LIMIT bytes (default 1,000,000, with what the summary file
# already holds counted) and ends with a note saying so.
set -uo pipefail

# append_capped REPORT SUMMARY LIMIT: REPORT appended to SUMMARY, cut at a line boundary so that
# SUMMARY stays under LIMIT bytes, with a note when it was cut.
append_capped() {
  local report=$1 summary=$2 limit=$3 note size used budget
  size=$(wc -c < "$report")
  used=0
  [ -f "$summary" ] && used=$(wc -c < "$summary")
  note=$'\n\n> memlint: this report was cut here (GitHub drops a job summary over 1 MiB); '
  note+="the full one is $size bytes: run \`memlint check --format markdown\` to see it."$'\n'
  budget=$(( limit - used ))
  if [ "$size" -le "$budget" ]; then
    cat "$report" >> "$summary"
  elif [ "$budget" -gt $(( ${#note} + 1 )) ]; then
    # whole lines only: the last line `head -c` cut in two is dropped
    head -c "$(( budget - ${#note} - 1 ))" "$report" | sed '$d' >> "$summary"
    printf '%s' "$note" >> "$summary"
  fi
}

memlint=${MEMLINT:-memlint}
read -r -a paths <<< "${MEMLINT_PATHS:-.}"
read -r -a extra <<< "${MEMLINT_ARGS:-}"

# annotations on the pull request, and the exit code that decides the job
$memlint check "${paths[@]}" "${extra[@]}" --format github
code=$?

if [ -n "${MEMLINT_SARIF:-}" ]; then
  $memlint check "${paths[@]}" "${extra[@]}" --format sarif > "$MEMLINT_SARIF" || true
fi
if [ "${MEMLINT_SUMMARY:-true}" = "true" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  report="$(mktemp)"
  $memlint check "${paths[@]}" "${extra[@]}" --format markdown > "$report" || true
  append_capped "$report" "$GITHUB_STEP_SUMMARY" "${MEMLINT_SUMMARY_LIMIT:-1000000}"
  rm -f "$report"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$code" >> "$GITHUB_OUTPUT"
fi
if [ "$code" -ge 2 ]; then
  echo "::error title=memlint::memlint could not run (exit $code); see the log above"
fi
exit 0
