// Raw TCP connections to servers of the test's own machine, for tests that play a peer which does
// not follow Weft's protocols (hostile or truncated bytes, half-open connections).
#pragma once

namespace weft::testing {

// A blocking connection to 127.0.0.1:port (close it with close()), or -1 where connect fails.
int DialLoopback(int port);

}  // namespace weft::testing
