#include "weft/comm/byte_size.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace weft {

std::optional<size_t> ParseByteSize(absl::string_view text) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double scale = 1;
  if (!number.empty()) {
    switch (absl::ascii_toupper(number.back())) {
      case 'K':
        scale = 1 << 10;
        break;
      case 'M':
        scale = 1 << 20;
        break;
      case 'G':
        scale = 1 << 30;
        break;
      default:
        break;
    }
    if (scale != 1) number = absl::StripAsciiWhitespace(number.substr(0, number.size() - 1));
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0 ||
      value * scale > 9e18) {
    return std::nullopt;
  }
  return static_cast<size_t>(value * scale);
}

}  // namespace weft
