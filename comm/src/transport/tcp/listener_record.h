// What a rank publishes in the store so that lower ranks can connect to it: the host it runs on
// and the addresses its listener can be reached at, best first.
//
// Text format (one item per line): "weft-tcp 1", the number of addresses n, n lines
// "<interface> <ip> <port>", and then the host identity (the rest of the text, which may contain
// anything). Connectors skip loopback addresses of a listener on another host.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/tcp/interfaces.h"

namespace weft::tcp {

struct ListenerRecord {
  std::string host_id;
  std::vector<InterfaceAddress> addresses;  // with the listener's port
};

std::string FormatListenerRecord(const ListenerRecord& record);

// Fails with InvalidArgument, saying what is wrong, on text not made by FormatListenerRecord.
absl::StatusOr<ListenerRecord> ParseListenerRecord(absl::string_view text);

}  // namespace weft::tcp
