#include "config.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/un.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "credits.hpp"

namespace sv {

Result<Endpoint> parse_endpoint(std::string_view s) {
    Endpoint ep;
    ep.text = std::string(s);
    if (s.starts_with("unix:")) {
        ep.kind = Endpoint::Kind::Unix;
        ep.path = std::string(s.substr(5));
        if (ep.path.empty()) return make_error("empty unix socket path");
        if (ep.path.size() >= 108) return make_error("unix socket path too long");
        return ep;
    }
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) return make_error(fmt::format("'{}' is not host:port", s));
    std::string_view host = s.substr(0, colon);
    std::string_view port = s.substr(colon + 1);
    if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
    if (host.empty()) return make_error(fmt::format("'{}' has no host", s));
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p == 0 || p > 65535)
        return make_error(fmt::format("'{}' has a bad port", s));
    ep.host = std::string(host);
    ep.port = static_cast<uint16_t>(p);
    return ep;
}

const UpstreamConfig* Config::upstream(std::string_view name) const {
    for (auto& u : upstreams)
        if (u.name == name) return &u;
    return nullptr;
}

int Config::upstream_index(std::string_view name) const {
    for (size_t i = 0; i < upstreams.size(); ++i)
        if (upstreams[i].name == name) return static_cast<int>(i);
    return -1;
}

int Config::route(std::string_view path) const {
    int best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < routes.size(); ++i) {
        const auto& p = routes[i].prefix;
        if (!path.starts_with(p)) continue;
        // "/echo" matches "/echo", "/echo/..." and "/echo?..", not "/echoes".
        if (p.size() != path.size() && !p.ends_with('/') && path[p.size()] != '/' &&
            path[p.size()] != '?')
            continue;
        if (best < 0 || p.size() > best_len) {
            best = static_cast<int>(i);
            best_len = p.size();
        }
    }
    return best;
}

namespace {

struct ConfigError {
    std::string msg;
};

class Reader {
  public:
    Reader(const toml::table& t, std::string section, const std::string& file)
        : t_(t), section_(std::move(section)), file_(file) {}

    [[noreturn]] void fail(const toml::source_region& where, const std::string& msg) const {
        throw ConfigError{fmt::format("{}:{}: {}", file_, where.begin.line, msg)};
    }
    [[noreturn]] void fail_here(const std::string& msg) const { fail(t_.source(), msg); }

    const toml::node* node(const char* key) {
        seen_.insert(key);
        return t_.get(key);
    }

    template <class Int>
    void integer(const char* key, Int& out, int64_t min, int64_t max) {
        auto* n = node(key);
        if (!n) return;
        auto v = n->value<int64_t>();
        if (!n->is_integer() || !v)
            fail(n->source(), fmt::format("[{}] {} must be an integer", section_, key));
        if (*v < min || *v > max)
            fail(n->source(),
                 fmt::format("[{}] {} = {} is out of range [{}, {}]", section_, key, *v, min, max));
        out = static_cast<Int>(*v);
    }

    // Integer bytes or a string such as "64KiB", "16MiB", "1G".
    template <class Int>
    void size(const char* key, Int& out, uint64_t min, uint64_t max) {
        auto* n = node(key);
        if (!n) return;
        uint64_t v = 0;
        if (n->is_integer()) {
            int64_t i = *n->value<int64_t>();
            if (i < 0)
                fail(n->source(), fmt::format("[{}] {} must not be negative", section_, key));
            v = static_cast<uint64_t>(i);
        } else if (n->is_string()) {
            std::string s = *n->value<std::string>();
            uint64_t num = 0;
            auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), num);
            std::string_view unit(ptr, s.data() + s.size() - ptr);
            uint64_t mul = 0;
            if (ec == std::errc()) {
                if (unit.empty() || unit == "B")
                    mul = 1;
                else if (unit == "K" || unit == "KiB" || unit == "k")
                    mul = 1ull << 10;
                else if (unit == "M" || unit == "MiB")
                    mul = 1ull << 20;
                else if (unit == "G" || unit == "GiB")
                    mul = 1ull << 30;
            }
            if (mul == 0)
                fail(n->source(), fmt::format("[{}] {} = \"{}\" is not a size (e.g. 64KiB, 16MiB)",
                                              section_, key, s));
            v = num * mul;
        } else {
            fail(n->source(), fmt::format("[{}] {} must be a size", section_, key));
        }
        if (v < min || v > max)
            fail(n->source(),
                 fmt::format("[{}] {} = {} is out of range [{}, {}]", section_, key, v, min, max));
        out = static_cast<Int>(v);
    }

    void number(const char* key, double& out, double min, double max) {
        auto* n = node(key);
        if (!n) return;
        auto v = n->value<double>();
        if (!(n->is_floating_point() || n->is_integer()) || !v)
            fail(n->source(), fmt::format("[{}] {} must be a number", section_, key));
        if (*v < min || *v > max)
            fail(n->source(),
                 fmt::format("[{}] {} = {} is out of range [{}, {}]", section_, key, *v, min, max));
        out = *v;
    }

    void boolean(const char* key, bool& out) {
        auto* n = node(key);
        if (!n) return;
        if (!n->is_boolean())
            fail(n->source(), fmt::format("[{}] {} must be true or false", section_, key));
        out = *n->value<bool>();
    }

    bool string(const char* key, std::string& out, bool required = false) {
        auto* n = node(key);
        if (!n) {
            if (required) fail_here(fmt::format("[{}] needs '{}'", section_, key));
            return false;
        }
        if (!n->is_string())
            fail(n->source(), fmt::format("[{}] {} must be a string", section_, key));
        out = *n->value<std::string>();
        return true;
    }

    bool endpoint(const char* key, Endpoint& out, bool required = false) {
        std::string s;
        if (!string(key, s, required)) return false;
        auto ep = parse_endpoint(s);
        if (!ep)
            fail(t_.get(key)->source(),
                 fmt::format("[{}] {}: {}", section_, key, ep.error().message));
        out = ep.value();
        return true;
    }

    void string_list(const char* key, std::vector<std::string>& out) {
        auto* n = node(key);
        if (!n) return;
        auto* arr = n->as_array();
        if (!arr)
            fail(n->source(), fmt::format("[{}] {} must be an array of strings", section_, key));
        out.clear();
        for (auto& e : *arr) {
            if (!e.is_string())
                fail(e.source(), fmt::format("[{}] {} must contain strings", section_, key));
            out.push_back(*e.value<std::string>());
        }
    }

    // Unknown keys are errors: a typo must not silently fall back to a default.
    void finish(std::initializer_list<const char*> subtables = {}) {
        for (auto&& [k, v] : t_) {
            std::string key(k.str());
            if (seen_.count(key)) continue;
            bool sub = std::any_of(subtables.begin(), subtables.end(),
                                   [&](const char* s) { return key == s; });
            if (!sub) fail(k.source(), fmt::format("unknown key '{}' in [{}]", key, section_));
        }
    }

    const toml::table& table() const { return t_; }

  private:
    const toml::table& t_;
    std::string section_;
    const std::string& file_;
    std::set<std::string> seen_;
};

const toml::table* subtable(Reader& parent, const char* key, const std::string& file) {
    auto* n = parent.node(key);
    if (!n) return nullptr;
    auto* t = n->as_table();
    if (!t)
        throw ConfigError{
            fmt::format("{}:{}: '{}' must be a table", file, n->source().begin.line, key)};
    return t;
}

const toml::array* table_array(Reader& parent, const char* key, const std::string& file) {
    auto* n = parent.node(key);
    if (!n) return nullptr;
    auto* a = n->as_array();
    if (!a || !a->is_array_of_tables())
        throw ConfigError{fmt::format("{}:{}: '{}' must be written as [[{}]] tables", file,
                                      n->source().begin.line, key, key)};
    return a;
}

void parse_into(const toml::table& root, Config& c) {
    const std::string& file = c.source;
    Reader r(root, "top level", file);
    r.string("log_level", c.log_level);
    static const std::set<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
    if (!levels.count(c.log_level))
        r.fail(root.get("log_level")->source(),
               fmt::format("log_level '{}' is not one of trace, debug, info, warn, error, off",
                           c.log_level));

    if (auto* t = subtable(r, "channel", file)) {
        Reader ch(*t, "channel", file);
        std::string tr = "tcp";
        if (ch.string("transport", tr)) {
            if (tr == "tcp")
                c.channel.transport = TransportKind::Tcp;
            else if (tr == "rdma")
                c.channel.transport = TransportKind::Rdma;
            else
                ch.fail(t->get("transport")->source(),
                        fmt::format("[channel] transport '{}' must be \"tcp\" or \"rdma\"", tr));
        }
        ch.integer("credits", c.channel.credits, 2, 4096);
        ch.size("slot_bytes", c.channel.slot_bytes, 4096, 16u << 20);
        ch.size("large_ring_bytes", c.channel.large_ring_bytes, 1u << 16, 1ull << 34);
        ch.size("max_frame_bytes", c.channel.max_frame_bytes, 4096, 1u << 30);
        ch.integer("connect_timeout_ms", c.channel.connect_timeout_ms, 1, 600000);
        ch.integer("reconnect_min_ms", c.channel.reconnect_min_ms, 1, 600000);
        ch.integer("reconnect_max_ms", c.channel.reconnect_max_ms, 1, 600000);
        ch.integer("heartbeat_ms", c.channel.heartbeat_ms, 10, 600000);
        ch.integer("rdma_signal_every", c.channel.rdma_signal_every, 1, 1024);
        ch.size("rdma_inline_bytes", c.channel.rdma_inline_bytes, 0, 4096);
        ch.integer("rdma_pool_chunks", c.channel.rdma_pool_chunks, 2, 65536);
        ch.integer("rdma_poll_budget", c.channel.rdma_poll_budget, 1, 1u << 20);
        ch.finish();
        if (c.channel.reconnect_max_ms < c.channel.reconnect_min_ms)
            ch.fail_here("[channel] reconnect_max_ms must be >= reconnect_min_ms");
        // The sender takes the ring in 64-byte units (credits.hpp), at most half of it
        // for one frame: a frame of max_frame_bytes must fit, rounded up, in half the
        // ring rounded down.
        if (ring_round(c.channel.max_frame_bytes) >
                c.channel.large_ring_bytes / kRingUnit * kRingUnit / 2 &&
            c.channel.transport == TransportKind::Rdma)
            ch.fail_here(
                "[channel] max_frame_bytes (rounded up to 64 B) must be at most half of "
                "large_ring_bytes (rounded down to 64 B)");
    }

    if (auto* t = subtable(r, "ingress", file)) {
        auto& in = c.ingress;
        in.present = true;
        Reader ir(*t, "ingress", file);
        ir.endpoint("listen", in.listen, true);
        ir.integer("workers", in.workers, 1, 256);
        ir.integer("max_connections", in.max_connections, 1, 1000000);
        ir.size("max_header_bytes", in.max_header_bytes, 256, 1u << 20);
        ir.size("max_body_bytes", in.max_body_bytes, 0, 1ull << 30);
        ir.integer("admission_limit", in.admission_limit, 1, 10000000);
        ir.integer("retry_after_s", in.retry_after_s, 0, 3600);
        ir.integer("client_timeout_ms", in.client_timeout_ms, 1, 3600000);
        ir.integer("idle_timeout_ms", in.idle_timeout_ms, 1, 3600000);
        ir.integer("send_timeout_ms", in.send_timeout_ms, 1, 3600000);
        ir.integer("request_timeout_ms", in.request_timeout_ms, 1, 3600000);
        ir.integer("drain_timeout_ms", in.drain_timeout_ms, 0, 3600000);
        ir.string("metrics_path", in.metrics_path);
        Endpoint mep;
        if (ir.endpoint("metrics_listen", mep)) in.metrics_listen = mep;
        ir.size("connection_buffer_bytes", in.connection_buffer_bytes, 4096, 1ull << 32);
        ir.size("memory_limit_bytes", in.memory_limit_bytes, 1u << 20, 1ull << 40);
        ir.string("access_log", in.access_log);
        if (!in.metrics_path.empty() && in.metrics_path[0] != '/')
            ir.fail(t->get("metrics_path")->source(), "[ingress] metrics_path must start with '/'");
        if (auto* arr = table_array(ir, "egress", file)) {
            for (auto& e : *arr) {
                EgressHost h;
                Reader er(*e.as_table(), "ingress.egress", file);
                er.string("name", h.name, true);
                er.endpoint("address", h.address, true);
                er.integer("connections", h.connections, 1, 64);
                er.string("source", h.source);
                if (!h.source.empty()) {
                    h.source_ep.host = h.source;
                    h.source_ep.text = h.source;
                }
                er.finish();
                for (auto& o : in.egress)
                    if (o.name == h.name)
                        er.fail_here(fmt::format("egress host '{}' defined twice", h.name));
                in.egress.push_back(std::move(h));
            }
        }
        ir.finish({"egress"});
        if (in.max_body_bytes + in.max_header_bytes + 4096 > c.channel.max_frame_bytes)
            ir.fail_here(fmt::format(
                "[ingress] max_body_bytes + max_header_bytes must fit in a channel frame "
                "([channel] max_frame_bytes = {})",
                c.channel.max_frame_bytes));
        if (in.egress.empty()) ir.fail_here("[ingress] needs at least one [[ingress.egress]] host");
    }

    if (auto* t = subtable(r, "egress", file)) {
        auto& eg = c.egress;
        eg.present = true;
        Reader er(*t, "egress", file);
        er.endpoint("listen", eg.listen, true);
        er.integer("workers", eg.workers, 1, 256);
        Endpoint m;
        if (er.endpoint("metrics_listen", m)) eg.metrics_listen = m;
        er.integer("drain_timeout_ms", eg.drain_timeout_ms, 0, 3600000);
        er.finish();
    }

    if (auto* arr = table_array(r, "upstream", file)) {
        for (auto& e : *arr) {
            UpstreamConfig u;
            Reader ur(*e.as_table(), "upstream", file);
            ur.string("name", u.name, true);
            if (u.name.empty() || u.name.size() > 255)
                ur.fail_here("[upstream] name must be 1..255 characters");
            ur.string_list("egress", u.egress);
            std::string cls;
            if (ur.string("class", cls)) {
                if (cls == "latency")
                    u.priority = 0;
                else if (cls == "bulk")
                    u.priority = 7;
                else if (cls == "normal")
                    u.priority = 4;
                else
                    ur.fail(
                        e.as_table()->get("class")->source(),
                        fmt::format("[upstream] class '{}' must be latency, normal or bulk", cls));
            }
            ur.integer("priority", u.priority, 0, 7);
            const double slo_default = u.slo_p99_ms;
            u.slo_p99_ms = -1;
            ur.number("slo_p99_ms", u.slo_p99_ms, 0.01, 600000.0);
            u.shed = u.slo_p99_ms > 0;  // a stated objective is a promise: shed to keep it
            if (!u.shed) u.slo_p99_ms = slo_default;
            ur.boolean("shed", u.shed);
            ur.integer("max_batch", u.max_batch, 1, 65535);
            ur.integer("max_delay_us", u.max_delay_us, 0, 60000000);
            ur.integer("initial_batch", u.initial_batch, 1, 65535);
            ur.integer("initial_delay_us", u.initial_delay_us, 0, 60000000);
            ur.boolean("adaptive", u.adaptive);
            std::string ctl;
            if (ur.string("controller", ctl)) {
                if (ctl == "slo")
                    u.model = true;
                else if (ctl == "aimd")
                    u.model = false;
                else
                    ur.fail_here(
                        fmt::format("[upstream] controller '{}' must be \"slo\" or \"aimd\"", ctl));
            }
            ur.boolean("eager_when_idle", u.eager_when_idle);
            ur.integer("max_inflight_batches", u.max_inflight_batches, 1, 1024);
            Endpoint svc;
            if (ur.endpoint("service", svc)) u.service = svc;
            ur.integer("pool", u.pool, 1, 100000);
            ur.integer("pipeline", u.pipeline, 1, 1024);
            if (ur.string("batch_path", u.batch_path) && !u.batch_path.starts_with('/'))
                ur.fail_here(
                    fmt::format("[upstream] batch_path '{}' must start with /", u.batch_path));
            ur.integer("service_timeout_ms", u.service_timeout_ms, 1, 3600000);
            ur.integer("service_connect_timeout_ms", u.service_connect_timeout_ms, 1, 600000);
            ur.finish();
            u.initial_batch = std::min(u.initial_batch, u.max_batch);
            u.initial_delay_us = std::min(u.initial_delay_us, u.max_delay_us);
            if (c.upstream(u.name))
                ur.fail_here(fmt::format("upstream '{}' defined twice", u.name));
            c.upstreams.push_back(std::move(u));
        }
    }

    if (auto* arr = table_array(r, "route", file)) {
        for (auto& e : *arr) {
            RouteConfig rt;
            Reader rr(*e.as_table(), "route", file);
            rr.string("prefix", rt.prefix, true);
            rr.string("upstream", rt.upstream, true);
            rr.finish();
            if (rt.prefix.empty() || rt.prefix[0] != '/')
                rr.fail_here(fmt::format("route prefix '{}' must start with '/'", rt.prefix));
            int idx = c.upstream_index(rt.upstream);
            if (idx < 0)
                rr.fail_here(
                    fmt::format("route '{}' names unknown upstream '{}'", rt.prefix, rt.upstream));
            rt.upstream_index = static_cast<size_t>(idx);
            for (auto& o : c.routes)
                if (o.prefix == rt.prefix)
                    rr.fail_here(fmt::format("route prefix '{}' defined twice", rt.prefix));
            c.routes.push_back(std::move(rt));
        }
    }
    r.finish({"channel", "ingress", "egress", "upstream", "route"});

    if (!c.ingress.present && !c.egress.present)
        throw ConfigError{fmt::format("{}:1: the file has neither [ingress] nor [egress]", file)};
    if (c.ingress.present) {
        for (auto& u : c.upstreams)
            for (auto& name : u.egress) {
                bool found = std::any_of(c.ingress.egress.begin(), c.ingress.egress.end(),
                                         [&](auto& h) { return h.name == name; });
                if (!found) {
                    const auto* at = root.get("upstream");
                    throw ConfigError{
                        fmt::format("{}:{}: upstream '{}' names unknown egress host '{}'", file,
                                    at ? at->source().begin.line : 1, u.name, name)};
                }
            }
    }
}

}  // namespace

Result<Config> parse_config(std::string_view text, std::string_view source_name) {
    Config c;
    c.source = std::string(source_name);
    try {
        toml::table root = toml::parse(text, source_name);
        parse_into(root, c);
    } catch (const toml::parse_error& e) {
        return make_error(
            fmt::format("{}:{}: {}", source_name, e.source().begin.line, e.description()));
    } catch (const ConfigError& e) {
        return make_error(e.msg);
    }
    return c;
}

Result<Config> load_config(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path);
}

Result<SockAddr> resolve_now(const Endpoint& ep) {
    SockAddr a;
    if (ep.kind == Endpoint::Kind::Unix) {
        auto* un = reinterpret_cast<sockaddr_un*>(&a.addr);
        un->sun_family = AF_UNIX;
        std::memcpy(un->sun_path, ep.path.c_str(), ep.path.size() + 1);
        a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + ep.path.size() + 1);
        a.family = AF_UNIX;
        return a;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(ep.port);
    int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || !res)
        return make_error(fmt::format("cannot resolve {}: {}", ep.text, gai_strerror(rc)));
    std::memcpy(&a.addr, res->ai_addr, res->ai_addrlen);
    a.len = res->ai_addrlen;
    a.family = res->ai_family;
    freeaddrinfo(res);
    return a;
}

Status resolve_addresses(Config& c, Role role) {
    auto one = [&](Endpoint& ep, std::string_view what) -> Status {
        if (ep.kind == Endpoint::Kind::Tcp && ep.host.empty()) return {};
        auto a = resolve_now(ep);
        if (!a) return make_error(fmt::format("{}: {}: {}", c.source, what, a.error().message));
        ep.addr = a.value();
        return {};
    };
    if (role == Role::Ingress && c.ingress.present) {
        if (auto st = one(c.ingress.listen, "[ingress] listen"); !st) return st;
        if (c.ingress.metrics_listen)
            if (auto st = one(*c.ingress.metrics_listen, "[ingress] metrics_listen"); !st)
                return st;
        for (auto& h : c.ingress.egress) {
            if (auto st = one(h.address, "egress host " + h.name); !st) return st;
            if (auto st = one(h.source_ep, "egress host " + h.name + " source"); !st) return st;
        }
    }
    if (role == Role::Ingress) return {};
    if (c.egress.present) {
        if (auto st = one(c.egress.listen, "[egress] listen"); !st) return st;
        if (c.egress.metrics_listen)
            if (auto st = one(*c.egress.metrics_listen, "[egress] metrics_listen"); !st) return st;
    }
    for (auto& u : c.upstreams)
        if (u.service)
            if (auto st = one(*u.service, "upstream " + u.name + " service"); !st) return st;
    return {};
}

}  // namespace sv
