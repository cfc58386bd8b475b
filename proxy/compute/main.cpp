// sverbs-compute: the demo compute service behind the proxy.  An ordinary HTTP/1.1 server:
//   POST /matmul?n=N   C = A x B with OpenBLAS (dgemm).  Body optional: 2*N*N little-endian
//                      float64 (A then B, row-major); without a body A and B are generated.
//                      Answers {"n":N,"checksum":sum(C)}; ?out=raw answers C as float64.
//   ANY  /echo...      returns the request body
//   GET  /healthz      "ok"
//   POST /batch        a batch of the requests above in one (docs/proxy.md, "Batched
//                      service calls"): the body is a pipeline of HTTP/1.1 requests
//                      (Content-Type: application/http, RFC 9112 10.1), the answer a pipeline
//                      of their responses, in order.  The /matmul requests of a batch that
//                      share n and B are computed with one dgemm: their A's stacked.
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

// What a handler needs of a request (a parsed message or one of a batch).
struct Request {
    std::string_view method, url, body;
    std::string_view path() const { return url.substr(0, url.find('?')); }
};

// A /matmul request's n and operands, or the answer that refuses it.
struct MatmulArgs {
    int n = 0;
    bool raw = false;
    std::string_view a, b;  // row-major float64 bytes; empty = generated
};

bool matmul_args(const Request& req, SimpleResponse& resp, int max_n, MatmulArgs& m) {
    if (req.method != "POST" && req.method != "GET") {
        resp.status = 405;
        resp.body = "use POST\n";
        return false;
    }
    m.n = query_int(req.url, "n", 64);
    if (m.n <= 0 || m.n > max_n) {
        resp.status = 400;
        resp.body = fmt::format("n must be 1..{}\n", max_n);
        return false;
    }
    const size_t bytes = static_cast<size_t>(m.n) * static_cast<size_t>(m.n) * sizeof(double);
    if (!req.body.empty()) {
        if (req.body.size() != 2 * bytes) {
            resp.status = 400;
            resp.body = fmt::format("body must be 2*n*n float64 = {} bytes, got {}\n", 2 * bytes,
                                    req.body.size());
            return false;
        }
        m.a = req.body.substr(0, bytes);
        m.b = req.body.substr(bytes);
    }
    m.raw = query_has(req.url, "out=raw");
    return true;
}

// The operand x (n x n) at dst: from the request's bytes, or generated (seed 7: A, 5: B).
void operand(double* dst, int n, std::string_view bytes, int seed) {
    const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
    if (!bytes.empty()) {
        std::memcpy(dst, bytes.data(), nn * sizeof(double));
        return;
    }
    for (size_t i = 0; i < nn; ++i)
        dst[i] =
            seed == 7 ? static_cast<double>((i % 7) + 1) : static_cast<double>((i % 5) + 1) * 0.5;
}

// The answer for C (n x n at c).
void matmul_answer(const MatmulArgs& m, const double* c, SimpleResponse& resp) {
    const size_t nn = static_cast<size_t>(m.n) * static_cast<size_t>(m.n);
    if (m.raw) {
        resp.content_type = "application/octet-stream";
        resp.body.assign(reinterpret_cast<const char*>(c), nn * sizeof(double));
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < nn; ++i) sum += c[i];
    resp.content_type = "application/json";
    resp.body = fmt::format("{{\"n\":{},\"checksum\":{}}}\n", m.n, sum);
}

// C = A B for `count` requests sharing n and B: one dgemm with their A's stacked
// (count*n x n).  Row i of C depends only on row i of A, so each request's C is what
// a dgemm of its own computes.
void matmul_stacked(Matmul& m, const std::vector<const MatmulArgs*>& group,
                    std::vector<SimpleResponse*>& resps) {
    const int n = group.front()->n;
    const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
    const size_t count = group.size();
    m.a.resize(count * nn);
    m.b.resize(nn);
    m.c.assign(count * nn, 0.0);
    for (size_t k = 0; k < count; ++k) operand(m.a.data() + k * nn, n, group[k]->a, 7);
    operand(m.b.data(), n, group.front()->b, 5);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(count) * n, n, n, 1.0,
                m.a.data(), n, m.b.data(), n, 0.0, m.c.data(), n);
    for (size_t k = 0; k < count; ++k) matmul_answer(*group[k], m.c.data() + k * nn, *resps[k]);
}

void handle(const Request& req, SimpleResponse& resp, int max_n, Matmul& m) {
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
        MatmulArgs a;
        if (!matmul_args(req, resp, max_n, a)) return;
        std::vector<const MatmulArgs*> one{&a};
        std::vector<SimpleResponse*> out{&resp};
        matmul_stacked(m, one, out);
        return;
    }
    resp.status = 404;
    resp.body = "not found\n";
}

// One request of a batch, parsed out of the batch's body.
struct BatchItem {
    std::string method, url, body;
    bool head = false;
    SimpleResponse resp;
    MatmulArgs mm;
    bool is_matmul = false;
};

// POST /batch: the body is a pipeline of HTTP/1.1 requests; the answer is the pipeline of
// their responses, in order.  A request that cannot be parsed ends the batch: it and
// everything after it are answered 400 (the caller still gets one answer per request it
// could delimit, and a short answer tells it the rest was not processed).
void handle_batch(const Request& req, SimpleResponse& resp, int max_n, Matmul& m,
                  const HttpLimits& lim) {
    if (req.method != "POST") {
        resp.status = 405;
        resp.body = "use POST\n";
        return;
    }
    std::vector<BatchItem> items;
    HttpParser p(HttpParser::Mode::Request, lim);
    std::string_view rest = req.body;
    while (!rest.empty()) {
        auto pr = p.feed(rest);
        if (pr.state != HttpParser::State::Complete) {
            resp.status = 400;
            resp.body =
                fmt::format("request {} of the batch: {}\n", items.size() + 1,
                            pr.state == HttpParser::State::Error ? p.error_name() : "truncated");
            return;
        }
        rest.remove_prefix(pr.consumed);
        auto& it = items.emplace_back();
        it.method = p.method;
        it.url = p.url;
        it.body = std::move(p.body);
        it.head = p.method == "HEAD";
        p.next();
    }
    // The /matmul requests, grouped by n and B: one stacked dgemm per group.
    std::vector<BatchItem*> mms;
    for (auto& it : items) {
        Request r{it.method, it.url, it.body};
        if (r.path() == "/matmul") {
            it.is_matmul = matmul_args(r, it.resp, max_n, it.mm);
            if (it.is_matmul) mms.push_back(&it);
        } else {
            handle(r, it.resp, max_n, m);
        }
    }
    std::vector<bool> done(mms.size(), false);
    std::vector<const MatmulArgs*> group;
    std::vector<SimpleResponse*> out;
    for (size_t i = 0; i < mms.size(); ++i) {
        if (done[i]) continue;
        group.clear();
        out.clear();
        for (size_t k = i; k < mms.size(); ++k) {
            if (done[k] || mms[k]->mm.n != mms[i]->mm.n || mms[k]->mm.b != mms[i]->mm.b) continue;
            done[k] = true;
            group.push_back(&mms[k]->mm);
            out.push_back(&mms[k]->resp);
        }
        matmul_stacked(m, group, out);
    }
    resp.content_type = "application/http; msgtype=response";
    for (auto& it : items) {
        std::string hdr = "Content-Type: " + it.resp.content_type + "\r\n" + it.resp.extra_headers;
        write_response(resp.body, it.resp.status, hdr, it.resp.body, true, it.head);
    }
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
                Request req{r.method, r.url, r.body};
                if (req.path() == "/batch")
                    handle_batch(req, s, max_n, m, lim);
                else
                    handle(req, s, max_n, m);
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
