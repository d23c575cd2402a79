#!/usr/bin/env bash
# The virtualenvs of the jobs that touch a cloud or decide where a deploy goes (deploy.yml, pr.yml's
# cloud preview), from the hashed lock files only (lock-requirements.sh makes them):
#   program  .venv from requirements.lock: the Pulumi program (Pulumi.yaml: virtualenv .venv) and
#            the offline CLI the workflows run (plan --json, review, teardown; no dev tools).
#   policy   components/policy/venv from components/policy/requirements.lock (PulumiPolicy.yaml:
#            virtualenv venv).
# --require-hashes: every distribution, dependencies included, must be in the lock with a matching
# sha256, or pip stops. --only-binary: wheels only, so no package's build code runs here.
# Not `bash .ci/setup`: that installs the dev tools from requirements-dev.txt, unhashed.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
[ "$#" -gt 0 ] || { echo "usage: $0 program|policy ..." >&2; exit 2; }
for what in "$@"; do
  case "$what" in
    program) venv=.venv lock=requirements.lock ;;
    policy) venv=components/policy/venv lock=components/policy/requirements.lock ;;
    *) echo "$0: unknown environment '$what' (allowed: program, policy)" >&2; exit 2 ;;
  esac
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: -r "$lock"
done
