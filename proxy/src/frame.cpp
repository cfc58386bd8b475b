#include "frame.hpp"

#include <fmt/format.h>

namespace sv {

void encode_header(char* p, const FrameHeader& h) {
    put_le<uint32_t>(p, kFrameMagic);
    p[4] = static_cast<char>(h.type);
    p[5] = static_cast<char>(h.flags);
    put_le<uint16_t>(p + 6, h.count);
    put_le<uint32_t>(p + 8, h.length);
    put_le<uint32_t>(p + 12, h.credits);
    put_le<uint32_t>(p + 16, h.ring_units);
    put_le<uint32_t>(p + 20, 0);
}

Result<FrameHeader> decode_header(const char* p, size_t n, uint32_t max_payload) {
    if (n < kFrameHeaderBytes) return make_error("short frame header");
    if (get_le<uint32_t>(p) != kFrameMagic)
        return make_error(fmt::format("bad frame magic {:#010x}", get_le<uint32_t>(p)));
    FrameHeader h;
    uint8_t t = static_cast<uint8_t>(p[4]);
    if (t < 1 || t > 7) return make_error(fmt::format("unknown frame type {}", t));
    h.type = static_cast<FrameType>(t);
    h.flags = static_cast<uint8_t>(p[5]);
    h.count = get_le<uint16_t>(p + 6);
    h.length = get_le<uint32_t>(p + 8);
    h.credits = get_le<uint32_t>(p + 12);
    h.ring_units = get_le<uint32_t>(p + 16);
    if (h.length > max_payload)
        return make_error(fmt::format("frame payload {} exceeds limit {}", h.length, max_payload));
    if (!frame_uses_credit(h.type) && h.type != FrameType::Hello && h.length != 0)
        return make_error(fmt::format("control frame type {} carries a payload", t));
    return h;
}

void encode_hello(std::string& out, const Hello& h) {
    out.clear();
    out.resize(kFrameHeaderBytes + 36);
    char* p = out.data() + kFrameHeaderBytes;
    put_le<uint16_t>(p, h.version);
    p[2] = static_cast<char>(h.role);
    p[3] = 0;
    put_le<uint32_t>(p + 4, h.credits);
    put_le<uint32_t>(p + 8, h.slot_bytes);
    put_le<uint32_t>(p + 12, h.max_frame);
    put_le<uint64_t>(p + 16, h.ring_addr);
    put_le<uint32_t>(p + 24, h.ring_rkey);
    put_le<uint64_t>(p + 28, h.ring_bytes);
    size_t n = std::min<size_t>(h.name.size(), 255);
    out.push_back(static_cast<char>(n));
    out.append(h.name.data(), n);
    FrameHeader fh;
    fh.type = FrameType::Hello;
    fh.length = static_cast<uint32_t>(out.size() - kFrameHeaderBytes);
    encode_header(out.data(), fh);
}

Result<Hello> decode_hello(std::string_view p) {
    if (p.size() < 37) return make_error("short hello");
    Hello h;
    h.version = get_le<uint16_t>(p.data());
    if (h.version != kProtocolVersion)
        return make_error(fmt::format("peer speaks protocol version {}, we speak {}", h.version,
                                      kProtocolVersion));
    h.role = static_cast<uint8_t>(p[2]);
    h.credits = get_le<uint32_t>(p.data() + 4);
    h.slot_bytes = get_le<uint32_t>(p.data() + 8);
    h.max_frame = get_le<uint32_t>(p.data() + 12);
    h.ring_addr = get_le<uint64_t>(p.data() + 16);
    h.ring_rkey = get_le<uint32_t>(p.data() + 24);
    h.ring_bytes = get_le<uint64_t>(p.data() + 28);
    size_t n = static_cast<unsigned char>(p[36]);
    if (p.size() != 37 + n) return make_error("hello name length mismatch");
    h.name = std::string(p.substr(37, n));
    if (h.credits == 0) return make_error("peer offers zero credits");
    return h;
}

Result<std::string_view> RecordReader::upstream() {
    if (p_.empty()) return make_error("requests frame without upstream name");
    size_t n = static_cast<unsigned char>(p_[0]);
    if (p_.size() < 1 + n) return make_error("truncated upstream name");
    auto name = p_.substr(1, n);
    p_.remove_prefix(1 + n);
    return name;
}

Result<bool> RecordReader::next(RequestRecord& r) {
    if (left_ == 0) return false;
    if (p_.size() < kRequestRecordBytes) return make_error("truncated request record");
    const char* p = p_.data();
    r.id = get_le<uint64_t>(p);
    size_t ml = static_cast<unsigned char>(p[8]);
    r.prio = static_cast<uint8_t>(p[9]);
    size_t ul = get_le<uint16_t>(p + 10);
    size_t hl = get_le<uint32_t>(p + 12);
    size_t bl = get_le<uint32_t>(p + 16);
    size_t total = kRequestRecordBytes + ml + ul + hl + bl;
    if (hl > p_.size() || bl > p_.size() || total > p_.size())
        return make_error("request record overruns frame");
    size_t o = kRequestRecordBytes;
    r.method = p_.substr(o, ml);
    o += ml;
    r.url = p_.substr(o, ul);
    o += ul;
    r.headers = p_.substr(o, hl);
    o += hl;
    r.body = p_.substr(o, bl);
    p_.remove_prefix(total);
    --left_;
    return true;
}

Result<bool> RecordReader::next(ResponseRecord& r) {
    if (left_ == 0) return false;
    if (p_.size() < kResponseRecordBytes) return make_error("truncated response record");
    const char* p = p_.data();
    r.id = get_le<uint64_t>(p);
    r.status = get_le<uint16_t>(p + 8);
    size_t hl = get_le<uint32_t>(p + 12);
    size_t bl = get_le<uint32_t>(p + 16);
    if (hl > p_.size() || bl > p_.size() || kResponseRecordBytes + hl + bl > p_.size())
        return make_error("response record overruns frame");
    r.headers = p_.substr(kResponseRecordBytes, hl);
    r.body = p_.substr(kResponseRecordBytes + hl, bl);
    p_.remove_prefix(kResponseRecordBytes + hl + bl);
    --left_;
    return true;
}

}  // namespace sv
