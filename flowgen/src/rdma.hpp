// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// rdma.hpp - the two ends of sverbs-flowgen over rdma_cm: run_server() (one
// listener, a QP per incoming flow) and run_client() (users x services flows,
// worker threads posting, one CM thread watching for a peer that goes away).
#pragma once

#include <stdexcept>

#include "config.hpp"
#include "report.hpp"
#include "sport.hpp"

namespace flowgen {

// Setup failures: printed, exit status 1, nothing started.
struct SetupError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The client's run (partial when r.aborted).  Throws SetupError/ConfigError
// before any traffic.
RunResult run_client(const Config& cfg);
// Serves until every flow that connected has gone (or SIGINT/SIGTERM).
RunResult run_server(const Config& cfg);

}  // namespace flowgen
