// Runs every file of a fuzz corpus through one fuzz target, so CTest checks the saved corpus in
// every build, with any compiler: `fuzz_replay_<target> DIR_OR_FILE...`. A failed check aborts
// (the test fails, naming the file last started); an empty corpus directory fails too.
#include <dirent.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> Files(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return {};
  if (!S_ISDIR(info.st_mode)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") files.push_back(path + "/" + name);
    }
    closedir(dir);
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  size_t total = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<std::string> files = Files(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "no corpus files in %s\n", argv[i]);
      return 1;
    }
    for (const std::string& file : files) {
      std::fprintf(stderr, "replaying %s\n", file.c_str());
      std::ifstream in(file, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      const std::string data = bytes.str();
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      ++total;
    }
  }
  std::printf("replayed %zu inputs\n", total);
  return 0;
}
