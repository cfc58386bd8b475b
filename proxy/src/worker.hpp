// Ingress and egress workers: one io_uring event loop per thread, shared nothing.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "config.hpp"
#include "metrics.hpp"
#include "uring.hpp"

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
    int listen_fd = -1;  // socket activation: the listening socket to use (shared, not owned)
};

// Drain and reload, written once for both roles: requests from the main thread are recorded
// under a lock and applied on the worker's own loop (a Waker), where on_reload() / on_drain()
// run.  A drain arrives once; a reload after the drain started is still applied.
class WorkerBase : public WorkerControl {
  public:
    void drain() override {
        {
            std::lock_guard lk(ctl_mu_);
            drain_req_ = true;
        }
        if (waker_) waker_->notify();
    }
    void reload(std::shared_ptr<const Config> cfg) override {
        {
            std::lock_guard lk(ctl_mu_);
            reload_req_ = std::move(cfg);
        }
        if (waker_) waker_->notify();
    }

  protected:
    void start_control(Ring& ring) {
        waker_ = std::make_unique<Waker>(ring, [this] { apply_control(); });
    }
    // The derived destructor calls this before its Ring goes away.
    void stop_control() { waker_.reset(); }
    virtual void on_reload(std::shared_ptr<const Config> cfg) = 0;
    virtual void on_drain(int64_t now) = 0;
    bool draining_ = false;
    int64_t drain_deadline_ = 0;

  private:
    void apply_control() {
        std::shared_ptr<const Config> r;
        bool d;
        {
            std::lock_guard lk(ctl_mu_);
            r = std::move(reload_req_);
            d = std::exchange(drain_req_, false);
        }
        if (r) on_reload(std::move(r));
        if (d && !draining_) {
            draining_ = true;
            on_drain(now_ns());
        }
    }
    std::mutex ctl_mu_;
    bool drain_req_ = false;
    std::shared_ptr<const Config> reload_req_;
    std::unique_ptr<Waker> waker_;
};

// Each runs on the calling thread until drained.  `ready` is called once listening
// (with an error message, empty on success) with a control handle; `done` is called when the
// worker stops, BEFORE the control handle is destroyed: after it returns, the main thread
// must not use the handle (it clears it under the same lock it calls drain/reload under).
using ReadyFn = std::function<void(const std::string& error, WorkerControl* ctl)>;
using DoneFn = std::function<void()>;
int run_ingress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done);
int run_egress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done);

}  // namespace sv
