#include "perf/options.h"

#include <getopt.h>

#include <optional>
#include <string_view>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "weft/comm/byte_size.h"

namespace weft::perf {
namespace {

// Long-only options.
constexpr int kInjectErrors = 1000;
constexpr int kCompression = 1001;
constexpr int kCodecBlock = 1002;
constexpr int kTopKRatio = 1003;
constexpr int kCompressionPath = 1004;

absl::Status Invalid(char flag, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("-", std::string(1, flag), " '", value, "': expected ", want));
}

absl::StatusOr<size_t> ParseSize(char flag, absl::string_view text) {
  std::optional<size_t> size = ParseByteSize(text);
  if (!size) return Invalid(flag, text, "a size in bytes, optionally with K, M or G");
  return *size;
}

template <typename Int>
absl::StatusOr<Int> ParseInt(char flag, absl::string_view text, Int min, Int max) {
  Int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return Invalid(flag, text, absl::StrCat("an integer from ", min, " to ", max));
  }
  return value;
}

// "0" or "1".
absl::StatusOr<bool> ParseSwitch(char flag, absl::string_view text) {
  absl::StatusOr<int> value = ParseInt<int>(flag, text, 0, 1);
  if (!value.ok()) return value.status();
  return *value != 0;
}

// nccl-tests' orders for "all".
constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                  DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                  DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                  DataType::kBFloat16};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                                ReduceOp::kAvg};

absl::Status ParseTypes(absl::string_view text, Options* o) {
  if (text == "all") {
    o->types.assign(std::begin(kAllTypes), std::end(kAllTypes));
    return absl::OkStatus();
  }
  std::optional<DataType> type = ParseDataType(std::string_view(text.data(), text.size()));
  if (!type) {
    return Invalid('d', text,
                   "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 all");
  }
  o->types = {*type};
  return absl::OkStatus();
}

absl::Status ParseOps(absl::string_view text, Options* o) {
  if (text == "all") {
    o->ops.assign(std::begin(kAllOps), std::end(kAllOps));
    return absl::OkStatus();
  }
  if (text == "mulsum") {
    return absl::InvalidArgumentError(
        "-o 'mulsum': NCCL's pre-multiplied sum has no Weft equivalent; use sum prod max min avg");
  }
  std::optional<ReduceOp> op = ParseReduceOp(std::string_view(text.data(), text.size()));
  if (!op) return Invalid('o', text, "sum prod max min avg all");
  o->ops = {*op};
  return absl::OkStatus();
}

// GPU- and thread-specific flags: accepted, and a note when the value asks for something.
void NoteIgnored(char flag, absl::string_view value, absl::string_view meaning,
                 absl::string_view neutral, std::vector<std::string>* notes) {
  if (value == neutral) return;
  notes->push_back(absl::StrCat("-", std::string(1, flag), " ", value, " ignored: ", meaning));
}

// -V auto,ring,...: distinct names, each "auto" or one algorithm for every collective (the
// communicator rejects names it does not know when it is created).
absl::Status ParseVariants(absl::string_view arg, Options* o) {
  o->variants.clear();
  for (absl::string_view name : absl::StrSplit(arg, ',')) {
    if (name.empty() || absl::StrContains(name, '=')) {
      return Invalid('V', arg, "a comma-separated list of algorithm names or auto");
    }
    if (absl::c_linear_search(o->variants, name)) {
      return Invalid('V', arg, absl::StrCat("each variant once (", name, " repeats)"));
    }
    o->variants.emplace_back(name);
  }
  return absl::OkStatus();
}

// --compression and its two settings, given in any order: `codec` is empty for "none".
struct CompressionFlags {
  std::optional<Codec> codec;
  std::optional<size_t> block;
  std::optional<double> topk_ratio;
  std::optional<ScatterPath> path;
};

absl::Status ParseCompression(absl::string_view text, CompressionFlags* flags) {
  if (text == "none") {
    flags->codec.reset();
    return absl::OkStatus();
  }
  flags->codec = ParseCodec(std::string_view(text.data(), text.size()));
  if (flags->codec) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--compression '", text, "': expected none fp16 bf16 int8 onebit topk"));
}

// The compressed collectives average fp32 arrays, and -P / -V describe uncompressed algorithms.
absl::Status ApplyCompression(const CompressionFlags& flags, bool ops_given, Options* o) {
  if (!flags.codec) {
    if (flags.block || flags.topk_ratio || flags.path) {
      return absl::InvalidArgumentError(
          "--compression_block, --topk_ratio and --compression_path need --compression CODEC");
    }
    return absl::OkStatus();
  }
  const char* name = Name(*flags.codec);
  if (o->types != std::vector<DataType>{DataType::kFloat32}) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compression ", name, " reduces fp32 arrays: -d must be float"));
  }
  if (ops_given && o->ops != std::vector<ReduceOp>{ReduceOp::kAvg}) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compression ", name, " computes the average: -o must be avg"));
  }
  if (o->predicted || !o->variants.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compression ", name, ": -P and -V describe uncompressed algorithms; drop them"));
  }
  CompressionOptions compression{.codec = *flags.codec};
  if (flags.block) compression.block = *flags.block;
  if (flags.topk_ratio) compression.topk_ratio = *flags.topk_ratio;
  if (flags.path) compression.scatter = *flags.path;
  o->ops = {ReduceOp::kAvg};
  o->compression = compression;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedOptions> ParseOptions(int argc, char** argv) {
  static const option kLong[] = {{"nthreads", required_argument, nullptr, 't'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"agg_iters", required_argument, nullptr, 'm'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"run_cycles", required_argument, nullptr, 'N'},
                                 {"parallel_init", required_argument, nullptr, 'p'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"stream_null", required_argument, nullptr, 'y'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"cudagraph", required_argument, nullptr, 'G'},
                                 {"report_cputime", required_argument, nullptr, 'C'},
                                 {"output_file", required_argument, nullptr, 'J'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"local_register", required_argument, nullptr, 'R'},
                                 {"unalign", required_argument, nullptr, 'u'},
                                 {"algorithm", required_argument, nullptr, 'A'},
                                 {"predicted", required_argument, nullptr, 'P'},
                                 {"variants", required_argument, nullptr, 'V'},
                                 {"inject_errors", required_argument, nullptr, kInjectErrors},
                                 {"compression", required_argument, nullptr, kCompression},
                                 {"compression_block", required_argument, nullptr, kCodecBlock},
                                 {"topk_ratio", required_argument, nullptr, kTopKRatio},
                                 {"compression_path", required_argument, nullptr, kCompressionPath},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  ParsedOptions parsed;
  Options& o = parsed.options;
  o.args.assign(argv, argv + argc);
  bool step_bytes_given = false;
  bool ops_given = false;
  CompressionFlags compression;
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:J:a:R:u:A:P:V:h",
                          kLong, nullptr)) != -1) {
    const absl::string_view arg = optarg != nullptr ? optarg : "";
    absl::Status status;
    const auto assign = [&status](auto parsed_value, auto* field) {
      if (parsed_value.ok()) {
        *field = *parsed_value;
      } else {
        status = parsed_value.status();
      }
    };
    switch (c) {
      case 't':
      case 'g': {
        int count = 0;
        assign(ParseInt<int>(static_cast<char>(c), arg, 1, 1 << 20), &count);
        NoteIgnored(static_cast<char>(c), arg,
                    "each Weft rank is one process; start more with weftrun -n", "1",
                    &parsed.notes);
        break;
      }
      case 'p':
        NoteIgnored('p', arg, "parallel initialisation of threads is GPU-specific", "0",
                    &parsed.notes);
        break;
      case 'y':
        NoteIgnored('y', arg, "CUDA streams are GPU-specific", "0", &parsed.notes);
        break;
      case 'G':
        NoteIgnored('G', arg, "CUDA graphs are GPU-specific", "0", &parsed.notes);
        break;
      case 'R':
        assign(ParseInt<int>('R', arg, 0, 2), &o.local_register);
        break;
      case 'b':
        assign(ParseSize('b', arg), &o.min_bytes);
        break;
      case 'e':
        assign(ParseSize('e', arg), &o.max_bytes);
        break;
      case 'i':
        assign(ParseSize('i', arg), &o.step_bytes);
        step_bytes_given = true;
        break;
      case 'f':
        assign(ParseInt<int64_t>('f', arg, 1, 1 << 20), &o.step_factor);
        break;
      case 'n':
        assign(ParseInt<int>('n', arg, 1, 1 << 30), &o.iters);
        break;
      case 'm':
        assign(ParseInt<int>('m', arg, 1, 1 << 20), &o.agg_iters);
        break;
      case 'w':
        assign(ParseInt<int>('w', arg, 0, 1 << 30), &o.warmup_iters);
        break;
      case 'N':
        assign(ParseInt<int>('N', arg, 0, 1 << 30), &o.run_cycles);
        break;
      case 'c':
        assign(ParseInt<int>('c', arg, 0, 1 << 20), &o.check);
        break;
      case 'o':
        status = ParseOps(arg, &o);
        ops_given = true;
        break;
      case 'd':
        status = ParseTypes(arg, &o);
        break;
      case 'r':
        assign(ParseInt<int>('r', arg, -1, 1 << 30), &o.root);
        break;
      case 'z':
        assign(ParseInt<int>('z', arg, 0, 2), &o.blocking);
        break;
      case 'T':
        assign(ParseInt<int>('T', arg, 0, 1 << 30), &o.timeout_s);
        break;
      case 'C':
        assign(ParseSwitch('C', arg), &o.report_cputime);
        break;
      case 'J':
        o.output_file = std::string(arg);
        if (o.output_file.empty()) status = Invalid('J', arg, "a file name");
        break;
      case 'a':
        assign(ParseInt<int>('a', arg, 0, 3), &o.average);
        break;
      case 'u':
        assign(ParseInt<int>('u', arg, 0, 1 << 20), &o.unalign);
        break;
      case 'A':
        o.algorithm = std::string(arg);
        break;
      case 'P':
        assign(ParseSwitch('P', arg), &o.predicted);
        break;
      case 'V':
        status = ParseVariants(arg, &o);
        break;
      case kInjectErrors:
        if (!absl::SimpleAtoi(arg, &o.inject_errors) || o.inject_errors < 0) {
          status = absl::InvalidArgumentError(
              absl::StrCat("--inject_errors '", arg, "': expected a count of elements >= 0"));
        }
        break;
      case kCompression:
        status = ParseCompression(arg, &compression);
        break;
      case kCodecBlock: {
        size_t block = 0;
        if (!absl::SimpleAtoi(arg, &block) || block == 0) {
          status = absl::InvalidArgumentError(
              absl::StrCat("--compression_block '", arg, "': expected a count of elements > 0"));
        }
        compression.block = block;
        break;
      }
      case kTopKRatio: {
        double ratio = 0;
        if (!absl::SimpleAtod(arg, &ratio) || !(ratio > 0 && ratio <= 1)) {
          status = absl::InvalidArgumentError(
              absl::StrCat("--topk_ratio '", arg, "': expected a share of elements in (0, 1]"));
        }
        compression.topk_ratio = ratio;
        break;
      }
      case kCompressionPath:
        if (absl::string_view(arg) == "auto") {
          compression.path = ScatterPath::kAuto;
        } else if (absl::string_view(arg) == "direct") {
          compression.path = ScatterPath::kDirect;
        } else if (absl::string_view(arg) == "ring") {
          compression.path = ScatterPath::kRing;
        } else {
          status = absl::InvalidArgumentError(
              absl::StrCat("--compression_path '", arg, "': expected auto, direct or ring"));
        }
        break;
      case 'h':
        o.help = true;
        break;
      case ':':
        status =
            absl::InvalidArgumentError(absl::StrCat("option ", argv[optind - 1], " needs a value"));
        break;
      default:
        status = absl::InvalidArgumentError(absl::StrCat("unknown option ", argv[optind - 1]));
        break;
    }
    if (!status.ok()) return status;
  }
  if (optind < argc) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", argv[optind], "': every setting is a flag"));
  }
  if (!o.variants.empty() && !o.algorithm.empty()) {
    return absl::InvalidArgumentError("-A and -V both choose algorithms: give one of them");
  }
  if (absl::Status s = ApplyCompression(compression, ops_given, &o); !s.ok()) return s;
  // A variant's row is read by the algorithm that ran: "auto" names none.
  if (!o.variants.empty()) o.predicted = true;
  if (o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid sizes for 'minbytes' and 'maxbytes': ", o.min_bytes, " > ", o.max_bytes));
  }
  if (o.step_factor > 1 && o.min_bytes == 0) {
    return absl::InvalidArgumentError("-b 0 with -f never grows: give -b a positive size");
  }
  if (o.step_factor == 1 && o.step_bytes == 0) {
    return absl::InvalidArgumentError(step_bytes_given
                                          ? "-i 0 never grows: give -i a positive step or use -f"
                                          : "the step is 0: give -i a positive step or use -f");
  }
  return parsed;
}

std::string Usage(const std::string& program) {
  return absl::StrCat("USAGE: ", program,
                      R"( [flags]   (one process per rank: weftrun -n N, mpirun, torchrun)
	[-b,--minbytes <min size in bytes, K/M/G suffixes>] (default 32M)
	[-e,--maxbytes <max size in bytes>] (default 32M)
	[-i,--stepbytes <increment size>] (default 1M)
	[-f,--stepfactor <increment factor>] (default 1: use -i)
	[-n,--iters <iteration count>] (default 20)
	[-m,--agg_iters <operations per iteration>] (default 1)
	[-w,--warmup_iters <warmup iteration count>] (default 1)
	[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)]
	[-c,--check <check iteration count>] (default 1; 0 prints N/A)
	[-o,--op <sum/prod/min/max/avg/all>] (default sum)
	[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/all>]
	[-r,--root <root>] (default 0; -1 runs every root)
	[-z,--blocking <0/1/2> 1=wait for completion and barrier, 2=wait without barrier]
	[-T,--timeout <time in seconds>] bound on the whole run (default 0: none)
	[-C,--report_cputime <0/1>] report the time to issue the operations
	[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]
	[-u,--unalign <elements>] misalign send and receive buffers (default 0)
	[-J,--output_file <file.json>] JSON report, written by rank 0
	[-A,--algorithm <name or collective=name,...>] Weft algorithm (default: WEFT_ALGO, else auto)
	[-P,--predicted <0/1>] add columns: the algorithm that ran, the tuner's predicted time for
	                       it and measured/predicted per half (default 0: nccl-tests' table)
	[-V,--variants <auto,name,...>] time these algorithms side by side in one run ("auto": the
	                       tuner's choice), each on a communicator of its own, taking turns at
	                       every size of every cycle; one row each, with -P's columns and the
	                       variant's name after them
	[--inject_errors <n>] debugging: after each check, flip a bit in the first n received
	                      elements on every checking rank, to see failures reported
	[--compression <none/fp16/bf16/int8/onebit/topk>] all_reduce_perf and reduce_scatter_perf
	                      only: time the compressed collective (the average of fp32 arrays:
	                      -d float, -o avg; synchronous, so -z changes nothing) on the same
	                      sizes; algbw and busbw stay on the uncompressed size, and two columns
	                      follow nccl-tests' own: the bytes a rank sends per operation and their
	                      ratio to an uncompressed ring's. -c checks the codec's documented
	                      result bit for bit (default none)
	[--compression_block <n>] int8 and onebit: elements per scale (default 256)
	[--topk_ratio <r>] topk: the share of elements sent, in (0, 1] (default 0.01)
	[--compression_path <auto/direct/ring>] the reduce-scatter (all-reduce: its first half) by the all-to-all or the ring that re-encodes at each hop (default auto: the cost model's choice)
	[-R,--local_register <0/1/2>] 1 or 2: buffers from weft::AllocShared, read in place by peers
	[-t,--nthreads] [-g,--ngpus] [-p] [-y] [-G]: GPU/thread flags, accepted and ignored
	[-h,--help]
Environment: NCCL_TESTS_MIN_BW=<GB/s> fails the run when the average bus bandwidth is below
0.9 x that value; WEFT_* variables configure the communicator (docs/ARCHITECTURE.md).
Exit status: 0 success, 2 usage, 3 communication error, 4 timeout (-T), 7 wrong values or
bandwidth below NCCL_TESTS_MIN_BW.
)");
}

}  // namespace weft::perf
