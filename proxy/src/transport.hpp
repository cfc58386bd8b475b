// The channel between ingress and egress: a small core (framing, credits, batching live
// above) and the transport behind one interface, eRPC-style.  Implementations: TCP
// (transport_tcp.cpp) and RDMA RC via rdmacm (transport_rdma.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common.hpp"
#include "config.hpp"
#include "frame.hpp"

namespace sv {

class Ring;
class Channel;

struct ChannelStats {
    uint64_t bytes_tx = 0, bytes_rx = 0;
    uint64_t frames_tx = 0, frames_rx = 0;
    uint64_t credit_stalls = 0;  // a data frame wanted to go but no credit was left
    uint64_t connects = 0, disconnects = 0;
    uint64_t large_frames = 0;  // RDMA: frames sent by WRITE_WITH_IMM
    uint64_t ring_probes = 0;  // RDMA: Pings sent at once because a large frame found no ring space
    // RDMA data path: verbs calls and copies into registered memory (per request: divide by
    // the requests; on rxe every post_send and every completion-channel read is a system call)
    uint64_t send_posts = 0;                // ibv_post_send calls
    uint64_t signaled = 0;                  // send WRs that asked for a completion
    uint64_t inline_sends = 0;              // SENDs with IBV_SEND_INLINE (no copy into a send slot)
    uint64_t inline_bytes = 0;              // their bytes (copied into the WQE by the provider)
    uint64_t copies = 0, copied_bytes = 0;  // frames memcpy'd into registered send memory
    uint64_t recv_posts = 0;                // ibv_post_recv calls
    uint64_t cq_polls = 0;                  // ibv_poll_cq calls
    uint64_t cq_events = 0;  // completion-channel wake-ups (read + ibv_req_notify_cq)

    void add(const ChannelStats& o) {
        bytes_tx += o.bytes_tx;
        bytes_rx += o.bytes_rx;
        frames_tx += o.frames_tx;
        frames_rx += o.frames_rx;
        credit_stalls += o.credit_stalls;
        connects += o.connects;
        disconnects += o.disconnects;
        large_frames += o.large_frames;
        ring_probes += o.ring_probes;
        send_posts += o.send_posts;
        signaled += o.signaled;
        inline_sends += o.inline_sends;
        inline_bytes += o.inline_bytes;
        copies += o.copies;
        copied_bytes += o.copied_bytes;
        recv_posts += o.recv_posts;
        cq_polls += o.cq_polls;
        cq_events += o.cq_events;
    }
};

class ChannelEvents {
  public:
    virtual void on_channel_up(Channel& ch) = 0;
    // All frames in flight on the channel are lost; the channel may come back (dialled).
    virtual void on_channel_down(Channel& ch) = 0;
    virtual void on_frame(Channel& ch, const FrameHeader& h, std::string_view payload) = 0;
    // Credits came back: blocked data frames may go now.
    virtual void on_writable(Channel& ch) = 0;

  protected:
    ~ChannelEvents() = default;
};

class Channel {
  public:
    virtual ~Channel() = default;
    virtual bool up() const = 0;
    // A data frame may be sent now (up, peer not draining, credit left).
    virtual bool can_send() const = 0;
    // frame: a whole frame built with FrameBuilder; the transport fills in credit fields.
    // prio: sverbs priority level (0 highest) for RDMA; ignored by TCP.
    virtual Status send(std::string_view frame, int prio) = 0;
    // Memory to assemble the next data frame of `bytes` in, so that send() of a frame built
    // there needs no copy (RDMA: a chunk of the registered pool, lent to the channel until a
    // frame from it is posted).  Empty: build it in your own buffer (TCP; RDMA: too large for
    // a chunk, or the pool is empty); send() then copies it.
    virtual std::span<char> frame_buffer(size_t bytes) {
        (void)bytes;
        return {};
    }
    // The frame being built in frame_buffer()'s memory moved out of it (copied to be sent
    // later): the memory goes back (RDMA: the chunk to the pool the device's channels share,
    // not kept by a channel that may stay idle).
    virtual void release_frame_buffer() {}
    // Tell the peer we are going away (Goodbye) but keep the channel open: it stops
    // sending requests while answers still flow.
    virtual void goodbye() = 0;
    // Orderly: Goodbye (if not said yet), flush, close; a dialled channel stays closed.
    virtual void close() = 0;
    virtual uint32_t credits_available() const = 0;
    virtual uint32_t credits_owed() const = 0;
    virtual const ChannelStats& stats() const = 0;
    virtual std::string_view transport_name() const = 0;
    // The peer said Goodbye: send no new requests.
    virtual bool peer_draining() const = 0;
    // Called inside on_frame: keep this data frame's credit (the peer may not send another
    // in its place) until release_credit(); the egress holds a frame until it is answered.
    void hold_credit() { hold_ = true; }
    virtual void release_credit() = 0;

    std::string name;       // peer name (egress host name or peer address)
    uint32_t id = 0;        // unique within the worker
    uint64_t epoch = 0;     // bumped every time the channel comes up
    size_t user_index = 0;  // owner's bookkeeping

  protected:
    bool hold_ = false;
};

class Transport {
  public:
    virtual ~Transport() = default;
    // Active side: a channel that connects, and reconnects with backoff, by itself.
    // source: local address to connect from (RDMA: selects the device); empty = any.
    virtual std::unique_ptr<Channel> dial(const Endpoint& ep, const Endpoint& source,
                                          std::string name, ChannelEvents& ev) = 0;
    // Passive side: accepted channels are owned by the transport and reported through
    // on_channel_up / on_channel_down; after on_channel_down the pointer is dead.
    virtual Status listen(const Endpoint& ep, ChannelEvents& ev) = 0;
    virtual void stop_listening() = 0;
    // Timers (reconnect, heartbeat, connect timeout); returns the next deadline.
    virtual int64_t tick(int64_t now) = 0;
    virtual size_t passive_count() const = 0;
};

struct TransportOptions {
    ChannelConfig channel;
    std::string local_name;
    uint8_t role = 0;    // 1 ingress, 2 egress
    int listen_fd = -1;  // TCP passive side: a listening socket passed by systemd (shared)
};

std::unique_ptr<Transport> make_tcp_transport(Ring& ring, const TransportOptions& o);
// Null with a reason when RDMA support is not compiled in or no device is usable.
Result<std::unique_ptr<Transport>> make_rdma_transport(Ring& ring, const TransportOptions& o);
bool rdma_compiled_in();

}  // namespace sv
