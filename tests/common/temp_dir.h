// TempDir: a fresh directory under /tmp for one test's files (flight-recorder dumps, file stores,
// tuning files), removed with everything in it when the object goes away, so that test runs
// leave nothing behind.
#pragma once

#include <string>

namespace weft::testing {

class TempDir {
 public:
  // "/tmp/weft-<tag>-XXXXXX"; path() is empty when the directory could not be made.
  explicit TempDir(const std::string& tag = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace weft::testing
