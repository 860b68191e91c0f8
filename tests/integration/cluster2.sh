#!/usr/bin/env bash
# cluster2.sh CMD...: CMD against the build's second local Slurm cluster
# (tests/integration/CMakeLists.txt): DTRAIN_BUILD_DIR/cluster2, its ports
# 10 above the first's (DTRAIN_CLUSTER_PORT, default 16817), so that two
# chains of cluster tests run side by side, each on a cluster of its own.
: "${DTRAIN_BUILD_DIR:?DTRAIN_BUILD_DIR must point at the build folder}"
export DTRAIN_CLUSTER_PORT=$((${DTRAIN_CLUSTER_PORT:-16817} + 10))
export SLURM_CONF=$DTRAIN_BUILD_DIR/cluster2/slurm.conf
exec "$@"
