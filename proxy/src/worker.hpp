// Ingress and egress workers: one io_uring event loop per thread, shared nothing.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "config.hpp"
#include "metrics.hpp"

namespace spdlog {
class logger;
}

namespace sv {

// Cross-thread control of a running worker.
class WorkerControl {
  public:
    virtual ~WorkerControl() = default;
    virtual void drain() = 0;                                    // SIGTERM
    virtual void reload(std::shared_ptr<const Config> cfg) = 0;  // SIGHUP
};

struct WorkerContext {
    int index = 0;
    std::shared_ptr<const Config> cfg;
    WorkerMetrics* metrics = nullptr;
    std::shared_ptr<spdlog::logger> access_log;  // may be null
};

// Each runs on the calling thread until drained.  `ready` is called once listening
// (with an error message, empty on success), with a control handle valid until return.
using ReadyFn = std::function<void(const std::string& error, WorkerControl* ctl)>;
int run_ingress_worker(WorkerContext ctx, const ReadyFn& ready);
int run_egress_worker(WorkerContext ctx, const ReadyFn& ready);

}  // namespace sv
