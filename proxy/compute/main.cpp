// sverbs-compute: the demo compute service behind the proxy.  An ordinary HTTP/1.1 server:
//   POST /matmul?n=N   C = A x B with OpenBLAS (dgemm).  Body optional: 2*N*N little-endian
//                      float64 (A then B, row-major); without a body A and B are generated.
//                      Answers {"n":N,"checksum":sum(C)}; ?out=raw answers C as float64.
//   ANY  /echo...      returns the request body
//   GET  /healthz      "ok"
#include <cblas.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <charconv>
#include <thread>
#include <vector>

#include "simple_server.hpp"

using namespace sv;

namespace {

int query_int(std::string_view url, std::string_view key, int dflt) {
    auto q = url.find('?');
    if (q == std::string_view::npos) return dflt;
    std::string_view qs = url.substr(q + 1);
    while (!qs.empty()) {
        auto amp = qs.find('&');
        auto part = qs.substr(0, amp);
        if (part.starts_with(key) && part.size() > key.size() && part[key.size()] == '=') {
            auto v = part.substr(key.size() + 1);
            int x = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (ec != std::errc() || p != v.data() + v.size()) return -1;
            return x;
        }
        if (amp == std::string_view::npos) break;
        qs.remove_prefix(amp + 1);
    }
    return dflt;
}

bool query_has(std::string_view url, std::string_view kv) {
    auto q = url.find('?');
    return q != std::string_view::npos && url.substr(q + 1).find(kv) != std::string_view::npos;
}

struct Matmul {
    std::vector<double> a, b, c;
};

void handle(const HttpParser& req, SimpleResponse& resp, int max_n, Matmul& m) {
    auto path = req.path();
    if (path == "/healthz") {
        resp.body = "ok\n";
        return;
    }
    if (path == "/echo" || path.starts_with("/echo/")) {
        resp.content_type = "application/octet-stream";
        resp.body = req.body;
        return;
    }
    if (path == "/matmul") {
        if (req.method != "POST" && req.method != "GET") {
            resp.status = 405;
            resp.body = "use POST\n";
            return;
        }
        int n = query_int(req.url, "n", 64);
        if (n <= 0 || n > max_n) {
            resp.status = 400;
            resp.body = fmt::format("n must be 1..{}\n", max_n);
            return;
        }
        size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
        m.a.resize(nn);
        m.b.resize(nn);
        m.c.assign(nn, 0.0);
        if (!req.body.empty()) {
            if (req.body.size() != 2 * nn * sizeof(double)) {
                resp.status = 400;
                resp.body = fmt::format("body must be 2*n*n float64 = {} bytes, got {}\n",
                                        2 * nn * sizeof(double), req.body.size());
                return;
            }
            std::memcpy(m.a.data(), req.body.data(), nn * sizeof(double));
            std::memcpy(m.b.data(), req.body.data() + nn * sizeof(double), nn * sizeof(double));
        } else {
            for (size_t i = 0; i < nn; ++i) {
                m.a[i] = static_cast<double>((i % 7) + 1);
                m.b[i] = static_cast<double>((i % 5) + 1) * 0.5;
            }
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, m.a.data(), n,
                    m.b.data(), n, 0.0, m.c.data(), n);
        if (query_has(req.url, "out=raw")) {
            resp.content_type = "application/octet-stream";
            resp.body.assign(reinterpret_cast<const char*>(m.c.data()), nn * sizeof(double));
            return;
        }
        double sum = 0;
        for (double x : m.c) sum += x;
        resp.content_type = "application/json";
        resp.body = fmt::format("{{\"n\":{},\"checksum\":{}}}\n", n, sum);
        return;
    }
    resp.status = 404;
    resp.body = "not found\n";
}

std::atomic<bool> g_stop{false};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"sverbs-compute: demo compute service (matmul with OpenBLAS, echo, healthz)"};
    std::string listen = "127.0.0.1:9000";
    unsigned workers = 1;
    int max_n = 1024;
    uint64_t max_body = 64u << 20;
    std::string log_level = "info";
    app.add_option("-l,--listen", listen, "host:port or unix:/path")->capture_default_str();
    app.add_option("-w,--workers", workers, "worker threads")
        ->check(CLI::Range(1u, 256u))
        ->capture_default_str();
    app.add_option("--max-n", max_n, "largest matrix dimension")
        ->check(CLI::Range(1, 8192))
        ->capture_default_str();
    app.add_option("--max-body", max_body, "largest request body in bytes")->capture_default_str();
    app.add_option("--log-level", log_level)->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    spdlog::set_level(spdlog::level::from_str(log_level));
    openblas_set_num_threads(1);

    auto ep = parse_endpoint(listen);
    if (!ep) {
        spdlog::error("--listen: {}", ep.error().message);
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);

    // Bind once up front so an address error is reported before threads start.
    if (ep->kind == Endpoint::Kind::Unix) workers = 1;
    std::vector<std::thread> threads;
    std::atomic<int> ready{0}, failed{0};
    std::vector<std::function<void()>> stoppers(workers);
    std::mutex mu;
    for (unsigned w = 0; w < workers; ++w) {
        threads.emplace_back([&, w] {
            Ring ring;
            if (auto st = ring.init(1024, 256, 16384); !st) {
                spdlog::error("{}", st.error().message);
                failed++;
                ready++;
                return;
            }
            Matmul m;
            HttpLimits lim{16384, max_body};
            SimpleServer srv(ring, lim, 30000, [&](const HttpParser& r, SimpleResponse& s) {
                handle(r, s, max_n, m);
            });
            if (auto st = srv.listen(ep.value(), true); !st) {
                spdlog::error("{}", st.error().message);
                failed++;
                ready++;
                return;
            }
            bool stop = false;
            Waker waker(ring, [&] { stop = true; });
            {
                std::lock_guard lk(mu);
                stoppers[w] = [&waker] { waker.notify(); };
            }
            ready++;
            int64_t next_sweep = now_ns() + 1000 * kMs;
            int64_t stop_deadline = 0;
            while (true) {
                ring.run_once(std::max<int64_t>(0, next_sweep - now_ns()));
                int64_t now = now_ns();
                if (stop && !stop_deadline) {
                    srv.stop();
                    stop_deadline = now + 5000 * kMs;
                }
                if (now >= next_sweep || stop) {
                    srv.sweep(now);
                    next_sweep = now + (stop ? 50 : 1000) * kMs;
                }
                if (stop && (srv.open() == 0 || now > stop_deadline)) break;
            }
            std::lock_guard lk(mu);
            stoppers[w] = nullptr;
            ring.shutdown();
        });
    }
    while (ready.load() < static_cast<int>(workers))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (failed) {
        for (auto& s : stoppers)
            if (s) s();
        for (auto& t : threads) t.join();
        return 1;
    }
    spdlog::info("sverbs-compute listening on {} ({} workers)", ep->text, workers);
    int sig = 0;
    sigwait(&set, &sig);
    spdlog::info("signal {}: stopping", sig);
    {
        std::lock_guard lk(mu);
        for (auto& s : stoppers)
            if (s) s();
    }
    for (auto& t : threads) t.join();
    return 0;
}
