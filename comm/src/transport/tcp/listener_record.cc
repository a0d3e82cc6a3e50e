#include "transport/tcp/listener_record.h"

#include <cstddef>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weft::tcp {
namespace {

constexpr absl::string_view kFormatLine = "weft-tcp 1";
// No host has more; the bound keeps a corrupt record from describing millions of addresses.
constexpr size_t kMaxAddresses = 1024;

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed tcp listener record: ", why));
}

}  // namespace

std::string FormatListenerRecord(const ListenerRecord& record) {
  std::string text = absl::StrCat(kFormatLine, "\n", record.addresses.size(), "\n");
  for (const InterfaceAddress& a : record.addresses) {
    absl::StrAppend(&text, a.name, " ", a.address.Ip(), " ", a.address.port(), "\n");
  }
  absl::StrAppend(&text, record.host_id);
  return text;
}

absl::StatusOr<ListenerRecord> ParseListenerRecord(absl::string_view text) {
  // Split off the fixed lines one at a time: the host id at the end may hold newlines.
  auto next_line = [&text](absl::string_view* line) {
    const size_t end = text.find('\n');
    if (end == absl::string_view::npos) return false;
    *line = text.substr(0, end);
    text.remove_prefix(end + 1);
    return true;
  };
  absl::string_view line;
  if (!next_line(&line) || line != kFormatLine) {
    return Malformed(absl::StrCat("expected '", kFormatLine, "' first"));
  }
  size_t count = 0;
  if (!next_line(&line) || !absl::SimpleAtoi(line, &count) || count > kMaxAddresses) {
    return Malformed("bad address count");
  }
  ListenerRecord record;
  for (size_t i = 0; i < count; ++i) {
    if (!next_line(&line)) return Malformed("fewer addresses than announced");
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    int port = 0;
    if (fields.size() != 3 || fields[0].empty() || !absl::SimpleAtoi(fields[2], &port)) {
      return Malformed(absl::StrCat("bad address line '", line, "'"));
    }
    absl::StatusOr<SocketAddress> address = SocketAddress::Parse(fields[1], port);
    if (!address.ok()) return Malformed(address.status().message());
    record.addresses.push_back(InterfaceAddress{std::string(fields[0]), *address});
  }
  record.host_id = std::string(text);
  return record;
}

}  // namespace weft::tcp
