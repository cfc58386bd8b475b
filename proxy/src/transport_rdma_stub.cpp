// Built when rdmacm/verbs are not available.
#include "transport.hpp"

namespace sv {

bool rdma_compiled_in() {
    return false;
}

Result<std::unique_ptr<Transport>> make_rdma_transport(Ring&, const TransportOptions&) {
    return make_error("this sverbs-proxy was built without RDMA support (no libibverbs/librdmacm)");
}

}  // namespace sv
