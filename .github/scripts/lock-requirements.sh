#!/usr/bin/env bash
# Regenerate the hashed lock files that the cloud jobs (deploy.yml, pr.yml's cloud preview) install
# with `pip install --require-hashes`, from the pinned requirement files they are made of:
#   requirements.txt                    -> requirements.lock                    (.venv: program + offline CLI)
#   components/policy/requirements.txt  -> components/policy/requirements.lock  (the policy pack's venv)
# Run it after changing either requirement file (tests/test_workflows.py fails until the lock
# pins the same versions). Needs the package index; uv comes into a throwaway virtualenv.
# Universal resolution for Python 3.11+ (one lock for Linux runners and developers' machines);
# wheels only (--no-build), so installing the lock never runs a package's build code.
set -euo pipefail
cd "$(dirname "$0")/../.."
uv_version=0.13.9
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
for requirements in requirements.txt components/policy/requirements.txt; do
  "$tmp/venv/bin/uv" pip compile --quiet --no-config --generate-hashes --universal --python-version 3.11 \
    --no-build --custom-compile-command "bash .github/scripts/lock-requirements.sh" \
    --output-file "${requirements%.txt}.lock" "$requirements"
done
