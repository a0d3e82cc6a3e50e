// LineRelay: turns one rank's output stream into whole lines, each led by the rank's tag.
//
// The launcher reads the ranks' pipes in whatever pieces the kernel hands over, which split lines
// anywhere. Relaying only whole lines is what lets several ranks share one stdout without two
// ranks' text ever mixing inside a line.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace weft::launcher {

class LineRelay {
 public:
  // An unfinished line is held back at most this long; a longer one (a progress bar redrawn with
  // '\r', a binary dump) is passed on in pieces of this size rather than buffered without bound.
  static constexpr size_t kMaxHeldBytes = 64 << 10;

  // `prefix` leads every line; empty relays the bytes unchanged, only grouped by line.
  explicit LineRelay(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends to `out` every line that `data` completes.
  void Feed(absl::string_view data, std::string* out);

  // Appends the unfinished last line, if any (the stream ended). With a prefix it gets the
  // newline it lacked so that the next line's tag starts a line of its own.
  void Finish(std::string* out);

 private:
  std::string prefix_;
  std::string held_;  // the unfinished last line
};

}  // namespace weft::launcher
