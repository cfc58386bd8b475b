// Channel framing, shared by every transport (TCP and RDMA carry identical bytes).
//
// Frame = 24-byte header + payload, little-endian:
//   0  u32 magic 'SVP1'     4  u8 type   5 u8 flags   6 u16 count (records)
//   8  u32 payload length  12  u32 credits returned (frames)
//  16  u32 ring credit returned (64-byte units, RDMA large-frame ring)   20 u32 reserved
// Requests payload : u8 upstream-name length, name, then `count` request records
//   record: u64 id, u8 method len, u8 prio, u16 url len, u32 header len, u32 body len,
//           then method, url, header block ("Name: value\r\n"...), body
// Responses payload: `count` response records
//   record: u64 id, u16 status, u16 reserved, u32 header len, u32 body len, headers, body
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common.hpp"

namespace sv {

constexpr uint32_t kFrameMagic = 0x31505653;  // "SVP1" little-endian
constexpr size_t kFrameHeaderBytes = 24;
constexpr size_t kRequestRecordBytes = 20;
constexpr size_t kResponseRecordBytes = 20;
constexpr uint16_t kProtocolVersion = 1;

enum class FrameType : uint8_t {
    Hello = 1,      // first frame each way: window and limits
    Requests = 2,   // ingress -> egress batch
    Responses = 3,  // egress -> ingress batch
    Credit = 4,     // explicit credit return (no payload)
    Ping = 5,
    Pong = 6,
    Goodbye = 7,  // orderly shutdown: stop sending requests
};

// Frames that consume a receive credit.  Control frames ride in a small reserve.
inline bool frame_uses_credit(FrameType t) {
    return t == FrameType::Requests || t == FrameType::Responses;
}

struct FrameHeader {
    FrameType type = FrameType::Ping;
    uint8_t flags = 0;
    uint16_t count = 0;
    uint32_t length = 0;
    uint32_t credits = 0;
    uint32_t ring_units = 0;
};

void encode_header(char* p, const FrameHeader& h);
// Validates magic, type and length (<= max_payload).
Result<FrameHeader> decode_header(const char* p, size_t n, uint32_t max_payload);

struct Hello {
    uint16_t version = kProtocolVersion;
    uint8_t role = 0;         // 1 ingress, 2 egress
    uint32_t credits = 0;     // frames the sender of this hello can receive
    uint32_t slot_bytes = 0;  // RDMA receive slot size
    uint32_t max_frame = 0;
    uint64_t ring_addr = 0;  // RDMA large-frame ring (0 on TCP)
    uint32_t ring_rkey = 0;
    uint64_t ring_bytes = 0;
    std::string name;
};
void encode_hello(std::string& out, const Hello& h);  // whole frame
Result<Hello> decode_hello(std::string_view payload);

struct RequestRecord {
    uint64_t id = 0;
    uint8_t prio = 0;
    std::string_view method, url, headers, body;
};
struct ResponseRecord {
    uint64_t id = 0;
    uint16_t status = 0;
    std::string_view headers, body;
};

// A fixed buffer with the few std::string operations BasicFrameBuilder uses: a frame
// assembled straight into registered memory (an RDMA pool chunk, Channel::frame_buffer()).
// The caller sizes what it adds (FrameBuilder::request_size); an operation that would not fit
// is refused and marks the buffer overflowed (the frame is then not sent from it).
class SpanBuf {
  public:
    SpanBuf(char* p, size_t cap) : p_(p), cap_(cap) {}
    void clear() { n_ = 0; }
    void resize(size_t n) {
        if (n > cap_) {
            overflow_ = true;
            return;
        }
        if (n > n_) std::memset(p_ + n_, 0, n - n_);
        n_ = n;
    }
    void push_back(char c) { append(&c, 1); }
    SpanBuf& append(const char* s, size_t n) {
        if (n_ + n > cap_) {
            overflow_ = true;
            return *this;
        }
        std::memcpy(p_ + n_, s, n);
        n_ += n;
        return *this;
    }
    SpanBuf& append(std::string_view s) { return append(s.data(), s.size()); }
    char* data() { return p_; }
    const char* data() const { return p_; }
    size_t size() const { return n_; }
    size_t capacity() const { return cap_; }
    char& operator[](size_t i) { return p_[i]; }
    bool overflowed() const { return overflow_; }
    operator std::string_view() const { return {p_, n_}; }

  private:
    char* p_;
    size_t cap_, n_ = 0;
    bool overflow_ = false;
};

// Builds one frame into a caller-owned, reused buffer (no allocation once warm): a
// std::string (FrameBuilder) or a SpanBuf over registered memory (SpanFrameBuilder).
template <class Buf>
class BasicFrameBuilder {
  public:
    explicit BasicFrameBuilder(Buf& buf) : buf_(buf) {}
    void begin(FrameType t) {
        buf_.clear();
        buf_.resize(kFrameHeaderBytes);
        buf_[4] = static_cast<char>(t);
        count_ = 0;
    }
    void begin_requests(std::string_view upstream) {
        begin(FrameType::Requests);
        size_t n = std::min<size_t>(upstream.size(), 255);
        buf_.push_back(static_cast<char>(n));
        buf_.append(upstream.data(), n);
    }
    void add_request(const RequestRecord& r) {
        size_t at = buf_.size();
        buf_.resize(at + kRequestRecordBytes);
        if (buf_.size() != at + kRequestRecordBytes) return;  // SpanBuf: did not fit
        char* p = buf_.data() + at;
        put_le<uint64_t>(p, r.id);
        p[8] = static_cast<char>(std::min<size_t>(r.method.size(), 255));
        p[9] = static_cast<char>(r.prio);
        put_le<uint16_t>(p + 10, static_cast<uint16_t>(std::min<size_t>(r.url.size(), 65535)));
        put_le<uint32_t>(p + 12, static_cast<uint32_t>(r.headers.size()));
        put_le<uint32_t>(p + 16, static_cast<uint32_t>(r.body.size()));
        buf_.append(r.method.substr(0, 255));
        buf_.append(r.url.substr(0, 65535));
        buf_.append(r.headers);
        buf_.append(r.body);
        ++count_;
    }
    void add_response(const ResponseRecord& r) {
        size_t at = buf_.size();
        buf_.resize(at + kResponseRecordBytes);
        if (buf_.size() != at + kResponseRecordBytes) return;
        char* p = buf_.data() + at;
        put_le<uint64_t>(p, r.id);
        put_le<uint16_t>(p + 8, r.status);
        put_le<uint16_t>(p + 10, 0);
        put_le<uint32_t>(p + 12, static_cast<uint32_t>(r.headers.size()));
        put_le<uint32_t>(p + 16, static_cast<uint32_t>(r.body.size()));
        buf_.append(r.headers);
        buf_.append(r.body);
        ++count_;
    }
    // Fills in length and count; returns the whole frame.
    std::string_view finish() {
        FrameHeader h;
        h.type = static_cast<FrameType>(buf_[4]);
        h.count = count_;
        h.length = static_cast<uint32_t>(buf_.size() - kFrameHeaderBytes);
        encode_header(buf_.data(), h);
        return std::string_view(buf_.data(), buf_.size());
    }
    size_t size() const { return buf_.size(); }
    uint16_t count() const { return count_; }
    static size_t request_size(const RequestRecord& r) {
        return kRequestRecordBytes + std::min<size_t>(r.method.size(), 255) +
               std::min<size_t>(r.url.size(), 65535) + r.headers.size() + r.body.size();
    }
    static size_t response_size(const ResponseRecord& r) {
        return kResponseRecordBytes + r.headers.size() + r.body.size();
    }
    // Bytes of a Requests frame's header and upstream name.
    static size_t requests_overhead(std::string_view upstream) {
        return kFrameHeaderBytes + 1 + std::min<size_t>(upstream.size(), 255);
    }

  private:
    Buf& buf_;
    uint16_t count_ = 0;
};
using FrameBuilder = BasicFrameBuilder<std::string>;
using SpanFrameBuilder = BasicFrameBuilder<SpanBuf>;

// Iterates the records of a Requests / Responses payload with bounds checks.
class RecordReader {
  public:
    RecordReader(std::string_view payload, uint16_t count) : p_(payload), left_(count) {}
    Result<std::string_view> upstream();  // Requests only, call first
    // ok(false) when done; error on truncation.
    Result<bool> next(RequestRecord& r);
    Result<bool> next(ResponseRecord& r);
    bool trailing_garbage() const { return left_ == 0 && !p_.empty(); }

  private:
    std::string_view p_;
    uint16_t left_;
};

}  // namespace sv
