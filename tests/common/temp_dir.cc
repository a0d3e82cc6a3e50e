#include "temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace weft::testing {

TempDir::TempDir(const std::string& tag) {
  const std::string pattern = "/tmp/weft-" + tag + "-XXXXXX";
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (mkdtemp(path.data()) != nullptr) path_ = path.data();
}

TempDir::~TempDir() {
  std::error_code ignored;  // a test must not fail on cleanup
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

}  // namespace weft::testing
