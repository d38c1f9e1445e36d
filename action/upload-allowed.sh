#!/usr/bin/env bash
# The memlint GitHub Action's SARIF upload gate (action.yml runs it; tests/test_action.py too).
#
# A pull request from a fork, or one Dependabot opened, runs with a read-only GITHUB_TOKEN: the
# upload to code scanning (security-events: write) would fail the job with "Resource not
# accessible by integration". Such runs skip the upload with a notice; the annotations and the
# exit code still gate the pull request. Inputs: MEMLINT_EVENT (github.event_name),
# MEMLINT_HEAD_REPO (the pull request's head repository), MEMLINT_REPO (github.repository),
# MEMLINT_ACTOR (github.actor). Writes allowed=true|false to $GITHUB_OUTPUT.
set -uo pipefail

allowed=true
reason=""
case "${MEMLINT_EVENT:-}" in
  pull_request|pull_request_review|pull_request_review_comment)
    if [ -n "${MEMLINT_HEAD_REPO:-}" ] && [ "${MEMLINT_HEAD_REPO}" != "${MEMLINT_REPO:-}" ]; then
      allowed=false
      reason="this pull request comes from the fork ${MEMLINT_HEAD_REPO}"
    elif [ "${MEMLINT_ACTOR:-}" = "dependabot[bot]" ]; then
      allowed=false
      reason="Dependabot opened this pull request"
    fi
    ;;
esac
if [ "$allowed" = false ]; then
  echo "::notice title=memlint::SARIF not uploaded to code scanning: ${reason}, and its token cannot write security events; the annotations above still show every finding"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "allowed=$allowed" >> "$GITHUB_OUTPUT"
fi
exit 0
