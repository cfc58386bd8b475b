// Small shared vocabulary: Result (errors as values), clock, byte helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace sv {

// What went wrong, for code that acts on it (never compare messages); the message is for
// people.
enum class Errc : uint8_t {
    Other = 0,
    NoCredit,     // a data frame must wait: no credit, no send slot, no ring space
    ChannelDown,  // the channel is not up
    Protocol,     // the peer broke the channel protocol
    Resolve,      // an address could not be resolved
    Config,       // the configuration is invalid
};

struct Error {
    std::string message;
    Errc code = Errc::Other;
};

// Minimal stand-in for std::expected (not available in g++ 12).
template <class T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error e) : v_(std::move(e)) {}
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() { return std::get<0>(v_); }
    const T& value() const { return std::get<0>(v_); }
    T* operator->() { return &value(); }
    T& operator*() { return value(); }
    const Error& error() const { return std::get<1>(v_); }

  private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error e) : err_(std::move(e)), ok_(false) {}
    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return err_; }

  private:
    Error err_;
    bool ok_ = true;
};

using Status = Result<void>;

inline Error make_error(std::string msg) {
    return Error{std::move(msg), Errc::Other};
}
inline Error make_error(Errc code, std::string msg) {
    return Error{std::move(msg), code};
}

// The monotonic clock, read now.
inline int64_t clock_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Event-loop time, like nginx's cached time: an event-loop thread reads the clock once when
// its io_uring wait returns (Ring::run_once) and at the top of each loop turn
// (refresh_loop_clock); everything in between -- per request, per frame -- reads the cached
// value.  Reading the clock is a system call where the vDSO cannot serve it (e.g. an HPET
// clocksource in a TCG guest: ~10-50 us each).  Threads without a loop read the clock.
inline thread_local int64_t tl_loop_now_ns = 0;
inline int64_t refresh_loop_clock() {
    return tl_loop_now_ns = clock_ns();
}
inline int64_t now_ns() {
    return tl_loop_now_ns ? tl_loop_now_ns : clock_ns();
}

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kUs = 1'000;

// Little-endian encode/decode helpers (the channel is little-endian on the wire).
template <class T>
inline void put_le(char* p, T v) {
    static_assert(std::is_integral_v<T>);
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
template <class T>
inline T get_le(const char* p) {
    static_assert(std::is_integral_v<T>);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
        v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i));
    return v;
}

}  // namespace sv
