#include "line_relay.h"

namespace weft::launcher {

void LineRelay::Feed(absl::string_view data, std::string* out) {
  for (size_t newline = data.find('\n'); newline != absl::string_view::npos;
       newline = data.find('\n')) {
    out->append(prefix_);
    out->append(held_);
    held_.clear();
    out->append(data.data(), newline + 1);
    data.remove_prefix(newline + 1);
  }
  held_.append(data.data(), data.size());
  if (held_.size() >= kMaxHeldBytes) Finish(out);
}

void LineRelay::Finish(std::string* out) {
  if (held_.empty()) return;
  out->append(prefix_);
  out->append(held_);
  if (!prefix_.empty()) out->push_back('\n');
  held_.clear();
}

}  // namespace weft::launcher
