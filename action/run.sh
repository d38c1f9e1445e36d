#!/usr/bin/env bash
# The memlint GitHub Action's step (action.yml runs it; tests/test_action.py runs it locally).
#
# Inputs come as environment variables: MEMLINT (the command, default `memlint`), MEMLINT_PATHS
# (space-separated files or directories, default "."), MEMLINT_ARGS (extra arguments for
# `memlint check`, e.g. "--world-size 64 --gpu H100-80GB"), MEMLINT_SARIF (a file to write SARIF
# to, empty for none), MEMLINT_SUMMARY ("true": append the Markdown report to
# $GITHUB_STEP_SUMMARY). It prints workflow annotations, and writes the check's exit code to
# $GITHUB_OUTPUT as exit-code (the action fails the job on it after the SARIF upload).
set -uo pipefail

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
  $memlint check "${paths[@]}" "${extra[@]}" --format markdown >> "$GITHUB_STEP_SUMMARY" || true
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$code" >> "$GITHUB_OUTPUT"
fi
if [ "$code" -ge 2 ]; then
  echo "::error title=memlint::memlint could not run (exit $code); see the log above"
fi
exit 0
