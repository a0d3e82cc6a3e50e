// A rank that shows the launcher's rendezvous works end to end: it connects to the store named by
// WEFT_ADDR, WEFT_PORT and WEFT_TOKEN, publishes "<rank>@<node>", and prints what every rank of
// the job published, in rank order: "gathered 0@0,1@0,2@1,3@1".
//
// With an argument N it then waits N milliseconds and reads the store once more ("still there"):
// a rank that uses the store after the other nodes' ranks have ended.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bootstrap/store.h"
#include "bootstrap/tcp_store.h"
#include "deadline.h"

namespace {

int Variable(const char* name) {
  const char* text = getenv(name);
  int value = -1;
  if (text == nullptr || !absl::SimpleAtoi(text, &value)) return -1;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  int linger_ms = 0;
  if (argc > 2 || (argc == 2 && !absl::SimpleAtoi(argv[1], &linger_ms))) {
    fprintf(stderr, "usage: store_probe [LINGER_MS]\n");
    return 2;
  }
  const int rank = Variable("WEFT_RANK");
  const int size = Variable("WEFT_SIZE");
  const int node = Variable("WEFT_NODE_RANK");
  const int port = Variable("WEFT_PORT");
  const char* addr = getenv("WEFT_ADDR");
  const char* token = getenv("WEFT_TOKEN");
  if (rank < 0 || size <= rank || node < 0 || port <= 0 || addr == nullptr || token == nullptr) {
    fprintf(stderr,
            "store_probe: WEFT_RANK, WEFT_SIZE, WEFT_NODE_RANK, WEFT_ADDR, WEFT_PORT or "
            "WEFT_TOKEN is missing or malformed\n");
    return 2;
  }
  const weft::Deadline deadline = weft::Deadline::In(absl::Seconds(10));
  absl::StatusOr<std::unique_ptr<weft::TcpStoreClient>> store =
      weft::TcpStoreClient::Connect(addr, port, token, deadline);
  if (!store.ok()) {
    fprintf(stderr, "store_probe: rank %d: %s\n", rank,
            std::string(store.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::vector<std::string>> all =
      weft::StoreAllGather(**store, "probe", rank, size, absl::StrCat(rank, "@", node), deadline);
  if (!all.ok()) {
    fprintf(stderr, "store_probe: rank %d: %s\n", rank,
            std::string(all.status().message()).c_str());
    return 1;
  }
  printf("gathered %s\n", absl::StrJoin(*all, ",").c_str());
  if (linger_ms == 0) return 0;

  fflush(stdout);
  usleep(linger_ms * 1000);
  absl::StatusOr<std::string> again = (*store)->Get("probe/0", deadline);
  if (!again.ok()) {
    fprintf(stderr, "store_probe: rank %d: %s\n", rank,
            std::string(again.status().message()).c_str());
    return 1;
  }
  printf("still there\n");
  return 0;
}
