#include "peer_options.h"

#include <getopt.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "weft/comm/byte_size.h"

namespace weft::peers {
namespace {

bool ParseSize(absl::string_view text, size_t* out) {
  std::optional<size_t> size = ParseByteSize(text);
  if (size) *out = *size;
  return size.has_value();
}

bool ParseInt(const char* text, int min, int max, int* out) {
  return absl::SimpleAtoi(text, out) && *out >= min && *out <= max;
}

}  // namespace

std::string PeerUsage(const char* prog) {
  return absl::StrCat("usage: ", prog,
                      " [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters]\n"
                      "          [-w warmup] [-c check] [-a 0|1|2|3] [-o sum|prod|min|max]\n"
                      "          [-d float|double|int32] [-T timeout_s] [--collective name]\n"
                      "          [--algorithm list] [--store dir]\n");
}

absl::StatusOr<PeerOptions> ParsePeerOptions(int argc, char** argv) {
  enum { kCollective = 1000, kStore };
  static const option kLong[] = {{"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"algorithm", required_argument, nullptr, 'A'},
                                 {"collective", required_argument, nullptr, kCollective},
                                 {"store", required_argument, nullptr, kStore},
                                 {nullptr, 0, nullptr, 0}};
  PeerOptions o;
  optind = 1;
  opterr = 0;  // the Status below says what was wrong
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:a:o:d:T:A:", kLong, nullptr)) != -1) {
    bool ok = true;
    switch (c) {
      case 'b':
        ok = ParseSize(optarg, &o.min_bytes);
        break;
      case 'e':
        ok = ParseSize(optarg, &o.max_bytes);
        break;
      case 'f':
        ok = absl::SimpleAtod(optarg, &o.step_factor) && o.step_factor >= 1;
        break;
      case 'i':
        ok = ParseSize(optarg, &o.step_bytes) && o.step_bytes > 0;
        o.step_factor = 1;
        break;
      case 'n':
        ok = ParseInt(optarg, 1, 1 << 30, &o.iters);
        break;
      case 'w':
        ok = ParseInt(optarg, 0, 1 << 30, &o.warmup);
        break;
      case 'c':
        ok = ParseInt(optarg, 0, 1 << 30, &o.check);
        break;
      case 'a':
        ok = ParseInt(optarg, 0, 3, &o.average);
        break;
      case 'T':
        ok = ParseInt(optarg, 0, 1 << 30, &o.timeout_s);
        break;
      case 'o': {
        std::optional<ReduceOp> op = ParseReduceOp(optarg);
        ok = op.has_value() && *op != ReduceOp::kAvg;
        if (ok) o.op = *op;
        break;
      }
      case 'd': {
        std::optional<DataType> type = ParseDataType(optarg);
        ok = type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kInt32;
        if (ok) o.type = *type;
        break;
      }
      case 'A':
        o.algorithms = absl::StrSplit(optarg, ',', absl::SkipEmpty());
        break;
      case kCollective:
        o.collective = optarg;
        break;
      case kStore:
        o.store_dir = optarg;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown option or missing value: '", argv[optind - 1], "'\n", PeerUsage(argv[0])));
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("bad value '", optarg, "' for -",
                                                     std::string(1, static_cast<char>(c)), "\n",
                                                     PeerUsage(argv[0])));
    }
  }
  if (optind < argc) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", argv[optind], "'\n", PeerUsage(argv[0])));
  }
  if (o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("-b ", o.min_bytes, " exceeds -e ", o.max_bytes));
  }
  return o;
}

std::vector<size_t> SweepSizes(const PeerOptions& options) {
  std::vector<size_t> sizes;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes;) {
    sizes.push_back(bytes);
    const size_t next = options.step_factor > 1
                            ? static_cast<size_t>(static_cast<double>(bytes) * options.step_factor)
                            : bytes + options.step_bytes;
    if (next <= bytes) break;  // a zero size cannot grow by a factor
    bytes = next;
  }
  return sizes;
}

}  // namespace weft::peers
