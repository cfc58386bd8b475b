#!/bin/bash
# run.sh - run the mlx5 adapter unit test (test_mlx5_adapter.c), which
# rdma-core's own build makes (providers/mlx5/tests/tests.cmake) into its
# bin/ folder and never installs.  For meson:
#
#   run.sh BINARY     e.g. build/rdma-core/build/bin/test_mlx5_adapter
set -euo pipefail

[ $# -eq 1 ] || {
	echo "usage: $0 PATH/TO/test_mlx5_adapter" >&2
	exit 2
}
bin=$1
if [ ! -x "$bin" ]; then
	echo "run.sh: $bin was not built (is CUnit installed? see rdma-core's configure.log)" >&2
	exit 1
fi
# (the test sets its own SVERBS_* configuration and drops the caller's;
# --glue: the context's entry points in pass-through, --budget: a batch
# budget; each its own process for its own configuration)
"$bin"
"$bin" --budget
exec "$bin" --glue
