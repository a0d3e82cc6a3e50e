// One rank of the C++ store rendezvous test, linked against libweft.so alone (with Abseil), as
// a framework's backend would be: CreateWithStore through a framework-style store kept in files,
// then collectives through the exported C++ API.
//
//   store_worker DIRECTORY   (under weftrun; the directory is empty and shared)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "weft/comm/store_rendezvous.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAIL %s\n", what.c_str());
}

// Keys are files; a value appears whole (written aside, then renamed).
class FileStore : public weft::ExternalStore {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    const std::string path = Path(key);
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out << value;
      if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
    }
    if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot rename to ", path));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    const absl::Time give_up = absl::Now() + timeout;
    for (;;) {
      std::ifstream in(Path(key), std::ios::binary);
      if (in) {
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
      }
      if (absl::Now() >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat("no key '", key, "'"));
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

 private:
  std::string Path(const std::string& key) const {
    return absl::StrCat(dir_, "/", absl::StrReplaceAll(key, {{"/", "_"}}));
  }
  std::string dir_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("WEFT_RANK");
  const char* size_env = std::getenv("WEFT_SIZE");
  if (argc != 2 || rank_env == nullptr || size_env == nullptr) return 2;
  const int rank = std::atoi(rank_env), size = std::atoi(size_env);
  FileStore store(argv[1]);

  // Two communicators, one key each (a counter, as ProcessGroupNCCL keeps).
  std::vector<std::unique_ptr<weft::Communicator>> comms;
  for (int i = 0; i < 2; ++i) {
    auto comm = weft::CreateWithStore(store, absl::StrCat("pg/", i), rank, size);
    Expect(comm.ok(), comm.status().ToString());
    if (!comm.ok()) return 1;
    comms.push_back(*std::move(comm));
  }
  double x = rank + 1;
  absl::Status s =
      comms[1]->AllReduce(&x, &x, 1, weft::DataType::kFloat64, weft::ReduceOp::kSum).Wait();
  Expect(s.ok() && x == size * (size + 1) / 2.0, absl::StrCat("all_reduce: ", s.ToString()));
  Expect(comms[0]->rank() == rank && comms[0]->size() == size, "rank and size");
  Expect(std::string(weft::Name(weft::DataType::kFloat64)) == "double", "Name(kFloat64)");

  // Rank 0 never sets this key: the others wait for it only as long as the timeout.
  if (rank != 0) {
    weft::CommOptions quick;
    quick.timeout = absl::Milliseconds(300);
    auto lonely = weft::CreateWithStore(store, "lonely", rank, size, quick);
    Expect(!lonely.ok() && absl::IsDeadlineExceeded(lonely.status()) &&
               absl::StrContains(lonely.status().message(),
                                 "getting rank 0's unique id under key 'lonely'"),
           lonely.status().ToString());
  }
  auto invalid = weft::CreateWithStore(store, "x", size, size);
  Expect(absl::IsInvalidArgument(invalid.status()), invalid.status().ToString());
  auto no_key = weft::CreateWithStore(store, "", rank, size);
  Expect(absl::IsInvalidArgument(no_key.status()), no_key.status().ToString());

  s = comms[0]->Barrier().Wait();
  Expect(s.ok(), s.ToString());
  std::printf("rank %d: store rendezvous through libweft.so: %d failures\n", rank, failures);
  return failures == 0 ? 0 : 1;
}
