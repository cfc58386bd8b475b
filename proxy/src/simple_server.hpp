// A small synchronous-handler HTTP/1.1 server on one Ring: used by sverbs-compute and the
// egress metrics listener.  Keep-alive, pipelining (in order), limits, idle timeouts.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http.hpp"
#include "uring.hpp"

namespace sv {

struct SimpleResponse {
    int status = 200;
    std::string content_type = "text/plain";
    std::string body;
    std::string extra_headers;  // "Name: value\r\n" lines
};

class SimpleServer {
  public:
    using Handler = std::function<void(const HttpParser& req, SimpleResponse& resp)>;
    SimpleServer(Ring& ring, HttpLimits limits, int64_t idle_timeout_ms, Handler h);
    ~SimpleServer();
    Status listen(const Endpoint& ep, bool reuseport);
    void stop();              // stop accepting, close idle connections
    void sweep(int64_t now);  // idle / slow-client timeouts
    size_t open() const { return open_; }

  private:
    struct Conn;
    void on_accept(int fd);
    Ring& ring_;
    HttpLimits limits_;
    int64_t idle_ns_;
    Handler handler_;
    std::unique_ptr<Acceptor> acceptor_;
    std::vector<std::unique_ptr<Conn>> conns_;
    std::vector<size_t> free_;
    size_t open_ = 0;
    bool stopping_ = false;
};

// head: answer to HEAD (no body; a Content-Length line in `headers` is the GET's length and
// is kept, else none is written).  http10: an HTTP/1.0 client, whose keep-alive must be
// confirmed with "Connection: keep-alive".
void write_response(std::string& out, int status, std::string_view headers, std::string_view body,
                    bool keep_alive, bool head = false, bool http10 = false);

}  // namespace sv
