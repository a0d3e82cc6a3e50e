#include "log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace weft {
namespace {

DebugLevel ConfiguredLevel() {
  static const DebugLevel level = [] {
    const char* value = std::getenv("WEFT_DEBUG");
    if (value == nullptr) return DebugLevel::kNone;
    const std::string v = absl::AsciiStrToUpper(value);
    if (v == "WARN") return DebugLevel::kWarn;
    if (v == "INFO") return DebugLevel::kInfo;
    if (v == "TRACE") return DebugLevel::kTrace;
    return DebugLevel::kNone;
  }();
  return level;
}

const char* LevelName(DebugLevel level) {
  switch (level) {
    case DebugLevel::kWarn:
      return "WARN";
    case DebugLevel::kInfo:
      return "INFO";
    case DebugLevel::kTrace:
      return "TRACE";
    case DebugLevel::kNone:
      break;
  }
  return "";
}

}  // namespace

bool DebugEnabled(DebugLevel level) { return ConfiguredLevel() >= level; }

void DebugLog(DebugLevel level, absl::string_view message) {
  if (!DebugEnabled(level)) return;
  const std::string line =
      absl::StrCat("weft ", LevelName(level), " pid ", getpid(), ": ", message, "\n");
  // One write() per line keeps lines whole.
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace weft
