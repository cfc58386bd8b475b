// sverbs-proxy: one binary, two roles (ingress / egress) from one TOML file.
#include <signal.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <thread>

#include "transport.hpp"
#include "worker.hpp"

using namespace sv;

namespace {
// Test hook (proxy/tests/int/faults.py reload-during-drain): widen the window between a
// worker's end and the main thread learning about it, where a SIGHUP used to reach a
// destroyed worker.
void test_exit_delay() {
    if (const char* v = std::getenv("SVERBS_PROXY_TEST_EXIT_DELAY_MS"))
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(v)));
}

// A proxy holds two descriptors per proxied connection: take the hard limit.
void raise_nofile() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
    rlim_t was = r.rlim_cur;
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) == 0)
        spdlog::debug("RLIMIT_NOFILE raised from {} to {}", was, r.rlim_max);
}

// systemd: READY=1 / RELOADING=1 / STOPPING=1 (no-ops without NOTIFY_SOCKET).
void notify(const char* state) {
    sd_notify(0, state);
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"sverbs-proxy: batching HTTP proxy over an RDMA (or TCP) RPC channel"};
    std::string config_path;
    std::string role;
    std::string log_level;
    bool check = false;
    app.add_option("-c,--config", config_path, "TOML configuration file")->required();
    app.add_option("-r,--role", role, "ingress or egress (needed when the file has both)")
        ->check(CLI::IsMember({"ingress", "egress"}));
    app.add_option("--log-level", log_level, "override log_level from the file");
    app.add_flag("--check", check, "validate the configuration and exit");
    CLI11_PARSE(app, argc, argv);

    auto loaded = load_config(config_path);
    if (!loaded) {
        fmt::print(stderr, "sverbs-proxy: {}\n", loaded.error().message);
        return 2;
    }
    if (check) {
        auto& c = loaded.value();
        if (c.channel.transport == TransportKind::Rdma && !rdma_compiled_in())
            fmt::print("{}: warning: transport = \"rdma\" but this build has no RDMA support\n",
                       config_path);
        fmt::print("{}: ok ({}{}{} upstreams, {} routes)\n", config_path,
                   c.ingress.present ? "ingress, " : "", c.egress.present ? "egress, " : "",
                   c.upstreams.size(), c.routes.size());
        return 0;
    }
    if (role.empty()) {
        if (loaded->ingress.present && loaded->egress.present) {
            fmt::print(stderr, "sverbs-proxy: {} has both [ingress] and [egress]: pass --role\n",
                       config_path);
            return 2;
        }
        role = loaded->ingress.present ? "ingress" : "egress";
    }
    bool ingress = role == "ingress";
    const Role my_role = ingress ? Role::Ingress : Role::Egress;
    // Host names are resolved here, on the main thread, never on an event loop.
    if (auto st = resolve_addresses(loaded.value(), my_role); !st) {
        fmt::print(stderr, "sverbs-proxy: {}\n", st.error().message);
        return 2;
    }
    auto cfg = std::make_shared<const Config>(std::move(loaded.value()));
    if (ingress && !cfg->ingress.present) {
        fmt::print(stderr, "sverbs-proxy: {} has no [ingress] section\n", config_path);
        return 2;
    }
    if (!ingress && !cfg->egress.present) {
        fmt::print(stderr, "sverbs-proxy: {} has no [egress] section\n", config_path);
        return 2;
    }
    if (!ingress) {
        bool any = false;
        for (auto& u : cfg->upstreams) any = any || u.service.has_value();
        if (!any) {
            fmt::print(stderr,
                       "sverbs-proxy: {}: egress needs at least one [[upstream]] with 'service'\n",
                       config_path);
            return 2;
        }
    }
    if (cfg->channel.transport == TransportKind::Rdma && !rdma_compiled_in()) {
        fmt::print(stderr,
                   "sverbs-proxy: transport = \"rdma\" but this build has no RDMA support\n");
        return 2;
    }
    spdlog::set_level(spdlog::level::from_str(log_level.empty() ? cfg->log_level : log_level));
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + role + "] %v");
    raise_nofile();

    // Socket activation: the first passed socket is the role's listener (ingress: the client
    // port; egress over TCP: the channel port).
    int listen_fd = -1;
    if (int n = sd_listen_fds(1); n > 0) {
        if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) > 0) {
            listen_fd = SD_LISTEN_FDS_START;
            spdlog::info("socket activation: using the listening socket passed as fd {}{}",
                         listen_fd, n > 1 ? " (further passed sockets are ignored)" : "");
        } else {
            spdlog::warn("socket activation: fd {} is not a listening stream socket; ignored",
                         SD_LISTEN_FDS_START);
        }
    }

    std::shared_ptr<spdlog::logger> access;
    if (ingress && !cfg->ingress.access_log.empty()) {
        try {
            access = spdlog::basic_logger_mt("access", cfg->ingress.access_log);
            access->set_pattern("%Y-%m-%dT%H:%M:%S.%e %v");
            access->flush_on(spdlog::level::info);
        } catch (const spdlog::spdlog_ex& e) {
            fmt::print(stderr, "sverbs-proxy: access_log: {}\n", e.what());
            return 2;
        }
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);  // a worker finished
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);

    unsigned n = ingress ? cfg->ingress.workers : cfg->egress.workers;
    // controls[i] is valid while non-null; a worker clears it (DoneFn) before it destroys
    // itself, under mu, and the main thread calls drain()/reload() only under mu.
    std::mutex mu;
    std::condition_variable cv;
    std::vector<WorkerControl*> controls(n, nullptr);
    std::vector<std::string> errors(n);
    unsigned reported = 0;
    std::atomic<unsigned> finished{0};
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < n; ++i) {
        WorkerContext ctx;
        ctx.index = static_cast<int>(i);
        ctx.cfg = cfg;
        ctx.metrics = &metrics_registry().add_worker(role, static_cast<int>(i));
        ctx.access_log = access;
        ctx.listen_fd = listen_fd;
        threads.emplace_back([&, ctx, i]() mutable {
            auto ready = [&](const std::string& err, WorkerControl* ctl) {
                std::lock_guard lk(mu);
                errors[i] = err;
                controls[i] = ctl;
                reported++;
                cv.notify_all();
            };
            auto done = [&] {
                std::lock_guard lk(mu);
                controls[i] = nullptr;
            };
            if (ingress)
                run_ingress_worker(std::move(ctx), ready, done);
            else
                run_egress_worker(std::move(ctx), ready, done);
            test_exit_delay();
            finished++;
            kill(getpid(), SIGUSR1);  // wake the signal loop
        });
    }
    {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return reported == n; });
    }
    bool failed = false;
    for (unsigned i = 0; i < n; ++i)
        if (!errors[i].empty()) {
            spdlog::error("worker {}: {}", i, errors[i]);
            failed = true;
        }
    if (failed) {
        {
            std::lock_guard lk(mu);
            for (auto* c : controls)
                if (c) c->drain();
        }
        for (auto& t : threads) t.join();
        return 1;
    }
    if (ingress)
        spdlog::info("ingress listening on {} ({} workers, {} transport, {} routes)",
                     cfg->ingress.listen.text, n,
                     cfg->channel.transport == TransportKind::Rdma ? "rdma" : "tcp",
                     cfg->routes.size());
    else
        spdlog::info("egress listening on {} ({} workers)", cfg->egress.listen.text, n);
    notify("READY=1");

    bool draining = false;
    while (finished.load() < n) {
        int sig = 0;
        sigwait(&set, &sig);
        if (sig == SIGHUP) {
            if (draining) {
                spdlog::info("SIGHUP while draining: ignored");
                continue;
            }
            sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
                       static_cast<unsigned long long>(clock_ns() / 1000));
            auto r = load_config(config_path);
            if (r) {
                if (auto st = resolve_addresses(r.value(), my_role); !st) r = st.error();
            }
            if (!r) {
                spdlog::error("reload failed, keeping the running configuration: {}",
                              r.error().message);
                notify("READY=1");
                continue;
            }
            auto next = std::make_shared<const Config>(std::move(r.value()));
            if ((ingress && !next->ingress.present) || (!ingress && !next->egress.present)) {
                spdlog::error("reload failed: the new file has no [{}] section", role);
                notify("READY=1");
                continue;
            }
            if (next->channel != cfg->channel) {
                // The transports keep the [channel] they started with, while the workers
                // would size frames by the new one: applying the rest would split them.
                spdlog::error(
                    "reload failed, keeping the running configuration: [channel] changes only "
                    "on restart");
                notify("READY=1");
                continue;
            }
            if (ingress && (next->ingress.listen.text != cfg->ingress.listen.text ||
                            next->ingress.workers != cfg->ingress.workers))
                spdlog::warn("reload: listen address and workers change only on restart");
            spdlog::info("SIGHUP: reloading {}", config_path);
            {
                std::lock_guard lk(mu);
                for (auto* c : controls)
                    if (c) c->reload(next);
            }
            notify("READY=1");
        } else if (sig == SIGTERM || sig == SIGINT) {
            if (draining) {
                spdlog::warn("second signal: exiting now");
                _exit(1);
            }
            draining = true;
            notify("STOPPING=1");
            spdlog::info("signal {}: draining", sig);
            std::lock_guard lk(mu);
            for (auto* c : controls)
                if (c) c->drain();
        }
    }
    for (auto& t : threads) t.join();
    spdlog::info("stopped");
    return 0;
}
