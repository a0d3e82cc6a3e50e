// The UCX transport: links over UCP (libucp), for networks UCX drives — InfiniBand and RoCE
// through libibverbs, and TCP — selected with WEFT_TRANSPORT=ucx for peers on other hosts (peers
// on the same host keep shared memory). Built only where UCX is found (WEFT_HAVE_UCX).
//
// Connect() steps: create the communicator's UCP worker, publish its address under
// "ucx/addr/<rank>", create an endpoint to every peer from the peer's published address, and
// exchange a hello with each (the job token and the communicator's name, on a tag of their own)
// so that endpoints are wired up, and a wrong peer rejected, before the communicator is declared
// up.
#pragma once

#include <memory>

#include "transport/link.h"

namespace weft {

std::unique_ptr<Transport> MakeUcxTransport();

}  // namespace weft
