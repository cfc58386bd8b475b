#!/bin/bash
# demo.sh - the main job: set up and build, boot the Soft-RoCE guest, and
# show stock rdma-core (SVERBS=off) and sverbs side by side on the same
# build, in one run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")" && pwd -P)
"$ROOT/scripts/setup.sh"
exec "$ROOT/perf/demo.sh" "$@"
