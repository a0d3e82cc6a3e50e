#include "bootstrap/unique_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weft {
namespace {

constexpr absl::string_view kPrefix = "weft1:";
constexpr size_t kTokenBytes = 16;

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed Weft unique id: ", why,
                   "; expected weft1:<host>:<port>:<token hex> exactly as rank 0 produced it"));
}

// Fills `out` from the kernel's CSPRNG; false when no source could deliver.
bool ReadRandom(unsigned char* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = getrandom(out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      break;  // ENOSYS on kernels before 3.17: fall back to the device
    }
  }
  if (got == size) return true;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (got < size) {
    const ssize_t n = read(fd, out + got, size - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fd);
  return got == size;
}

}  // namespace

absl::StatusOr<ParsedUniqueId> ParseUniqueId(const std::string& id) {
  if (!absl::StartsWith(id, kPrefix)) {
    if (absl::StartsWith(id, "weft") && id.find(':') != std::string::npos) {
      return Malformed(absl::StrCat("version '", absl::string_view(id).substr(0, id.find(':')),
                                    "' is not the one this process reads (weft1)"));
    }
    return Malformed("it does not start with 'weft1:'");
  }
  // Split from the right: the host may be an IPv6 address full of colons.
  const absl::string_view rest = absl::string_view(id).substr(kPrefix.size());
  const size_t token_colon = rest.rfind(':');
  if (token_colon == absl::string_view::npos) return Malformed("no ':<port>:<token>' part");
  const absl::string_view token = rest.substr(token_colon + 1);
  const absl::string_view host_port = rest.substr(0, token_colon);
  const size_t port_colon = host_port.rfind(':');
  if (port_colon == absl::string_view::npos) return Malformed("no ':<port>' part");
  const absl::string_view port_text = host_port.substr(port_colon + 1);
  absl::string_view host = host_port.substr(0, port_colon);

  if (!host.empty() && host.front() == '[') {
    if (host.size() < 2 || host.back() != ']') return Malformed("unbalanced '[' in the host");
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return Malformed("the host is empty");
  if (std::any_of(host.begin(), host.end(), [](char c) {
        return absl::ascii_isspace(c) || absl::ascii_iscntrl(c) || c == '[' || c == ']';
      })) {
    return Malformed("the host contains whitespace, control characters or stray brackets");
  }
  int port = 0;
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return Malformed(absl::StrCat("the port '", port_text.substr(0, 16),
                                  "' is not a decimal number in 1..65535"));
  }
  // The token is the job's secret: say what is wrong with it, never what it is.
  if (token.empty()) return Malformed("the token is empty");
  if (token.size() > kMaxUniqueIdTokenChars) {
    return Malformed(absl::StrCat("the token has ", token.size(), " characters, more than ",
                                  kMaxUniqueIdTokenChars));
  }
  if (!std::all_of(token.begin(), token.end(), absl::ascii_isxdigit)) {
    return Malformed("the token holds characters other than hex digits");
  }
  return ParsedUniqueId{std::string(host), port, std::string(token)};
}

std::string FormatUniqueId(const ParsedUniqueId& id) {
  const bool bracket = id.host.find(':') != std::string::npos;
  return absl::StrCat(kPrefix, bracket ? "[" : "", id.host, bracket ? "]" : "", ":", id.port, ":",
                      id.token);
}

std::string NewToken() {
  unsigned char bytes[kTokenBytes];
  if (!ReadRandom(bytes, sizeof(bytes))) return "";
  constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 0xf]);
  }
  return token;
}

}  // namespace weft
