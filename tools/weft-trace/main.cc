// weft-trace: reads the flight-recorder dumps of a job's ranks and says what went wrong.
//
//   weft-trace [--chrome OUT.json] PATH...
//
// Each PATH is a dump (rank<r>.json) or a directory of them (WEFT_FLIGHT_RECORDER_DIR, by
// default /tmp/weft-flight-<job>/). Prints, per communicator, the first operation that did not
// complete on every rank and what each rank was doing: completed it, failed in it (why), still
// inside it, or never reached it; and names the culprit. --chrome also writes every recorded
// operation as a Chrome/Perfetto trace. Exit status: 0 with a report, 2 when no dump was readable.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis.h"
#include "dump.h"

namespace {

constexpr char kUsage[] =
    "Usage: weft-trace [--chrome OUT.json] PATH...\n"
    "  PATH: a flight-recorder dump (rank<r>.json) or a directory of them\n"
    "        (WEFT_FLIGHT_RECORDER_DIR, default /tmp/weft-flight-<job>/)\n"
    "  --chrome OUT.json  also write a Chrome/Perfetto trace of every recorded operation\n";

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// The dump files named by `path`: itself, or the *.json files of a directory.
std::vector<std::string> Expand(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (absl::EndsWith(name, ".json")) files.push_back(absl::StrCat(path, "/", name));
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::string chrome;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--chrome") {
      if (i + 1 >= argc) {
        std::fputs(kUsage, stderr);
        return 2;
      }
      chrome = argv[++i];
    } else if (absl::StartsWith(arg, "--chrome=")) {
      chrome = arg.substr(9);
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::vector<weft::trace::RankDump> dumps;
  for (const std::string& path : paths) {
    for (const std::string& file : Expand(path)) {
      std::string text;
      if (!ReadFile(file, &text)) {
        std::fprintf(stderr, "weft-trace: cannot read %s\n", file.c_str());
        continue;
      }
      absl::StatusOr<weft::trace::RankDump> dump = weft::trace::ParseDump(text, file);
      if (!dump.ok()) {
        std::fprintf(stderr, "weft-trace: skipping %s\n",
                     std::string(dump.status().message()).c_str());
        continue;
      }
      dumps.push_back(*std::move(dump));
    }
  }
  if (dumps.empty()) {
    std::fprintf(stderr, "weft-trace: no readable flight-recorder dump\n");
    return 2;
  }
  std::fputs(weft::trace::Diagnose(dumps).c_str(), stdout);
  if (!chrome.empty()) {
    std::ofstream out(chrome, std::ios::binary | std::ios::trunc);
    out << weft::trace::ChromeTrace(dumps);
    if (!out) {
      std::fprintf(stderr, "weft-trace: cannot write %s\n", chrome.c_str());
      return 2;
    }
    std::printf("chrome trace: %s (open in ui.perfetto.dev or chrome://tracing)\n", chrome.c_str());
  }
  return 0;
}
