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

#include <cstdint>
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

// Builds one frame into a caller-owned, reused buffer (no allocation once warm).
class FrameBuilder {
  public:
    explicit FrameBuilder(std::string& buf) : buf_(buf) {}
    void begin(FrameType t);
    void begin_requests(std::string_view upstream);
    void add_request(const RequestRecord& r);
    void add_response(const ResponseRecord& r);
    // Fills in length and count; returns the whole frame.
    std::string_view finish();
    size_t size() const { return buf_.size(); }
    uint16_t count() const { return count_; }
    static size_t request_size(const RequestRecord& r) {
        return kRequestRecordBytes + r.method.size() + r.url.size() + r.headers.size() +
               r.body.size();
    }
    static size_t response_size(const ResponseRecord& r) {
        return kResponseRecordBytes + r.headers.size() + r.body.size();
    }

  private:
    std::string& buf_;
    uint16_t count_ = 0;
};

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
