// --compression: all_reduce_perf and reduce_scatter_perf time the compressed collectives, run
// for real under weftrun (shared memory, and TCP once). Every codec's lossy result passes the
// tools' own check (0 wrong, exit 0), the wire column holds the documented bytes per operation,
// wrong values still fail the run, and the other tools refuse the flag.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "perf_output.h"
#include "perf_runner.h"
#include "rank_process.h"
#include "subprocess.h"
#include "weft/kernels/codec.h"

namespace weft::testing {
namespace {

struct Setting {
  std::string codec;
  size_t block = 256;
  double topk_ratio = 0.01;
  std::string path = "auto";  // --compression_path
};

// The documented bytes a rank sends per operation for an fp32 array of `count` elements: chunks
// of ceil(count / N); all-reduce sends 2(N-1) encoded chunks (top-k: N-1 lists of
// ceil(ratio count) entries of the whole array), reduce-scatter N-1 (top-k: ceil(ratio chunk)
// entries each).
uint64_t DocumentedWireBytes(const std::string& tool, const Setting& s, size_t count, int ranks) {
  const size_t n = static_cast<size_t>(ranks), chunk = (count + n - 1) / n;
  const bool all_reduce = tool == "all_reduce";
  const auto top_k = [&s](size_t elements) {
    return TopKEncodedBytes(std::min(
        elements, static_cast<size_t>(std::ceil(s.topk_ratio * static_cast<double>(elements)))));
  };
  if (s.codec == "topk" && all_reduce) return (n - 1) * top_k(count);
  const size_t encoded = s.codec == "int8"     ? Int8EncodedBytes(chunk, s.block)
                         : s.codec == "onebit" ? SignEncodedBytes(chunk, s.block)
                         : s.codec == "topk"   ? top_k(chunk)
                                               : 2 * chunk;
  return (all_reduce ? 2 : 1) * (n - 1) * encoded;
}

std::vector<std::string> Flags(const Setting& s, std::vector<std::string> flags) {
  flags.insert(flags.end(),
               {"--compression", s.codec, "--compression_block", std::to_string(s.block),
                "--topk_ratio", absl::StrCat(s.topk_ratio), "--compression_path", s.path});
  return flags;
}

// Runs `tool` on `ranks` ranks and checks what every compressed run must show.
void ExpectExactAndDocumented(const std::string& tool, int ranks, const Setting& s,
                              const Env& env = {}) {
  SCOPED_TRACE(absl::StrCat(tool, " on ", ranks, " ranks, ", s.codec));
  // Sizes whose element counts do not divide by the ranks: the last chunk is padded.
  ProcessResult result =
      RunTool(tool, ranks, Flags(s, {"-b", "1000", "-e", "100000", "-f", "10", "-n", "2"}), env);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n") << "\n" << result.output;
  EXPECT_TRUE(out.compressed_header) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat("# Compression: ", s.codec)));
  EXPECT_EQ(out.out_of_bounds, 0);
  ASSERT_EQ(out.rows.size(), 3u) << result.output;
  for (const PerfRow& row : out.rows) {
    SCOPED_TRACE(absl::StrCat("size ", row.size));
    EXPECT_EQ(row.redop, "avg");
    EXPECT_EQ(row.type, "float");
    EXPECT_EQ(row.half[0].wrong, 0);
    EXPECT_EQ(row.half[1].wrong, 0);
    ASSERT_TRUE(row.wire.has_value());
    const size_t count = static_cast<size_t>(row.size) / sizeof(float);
    const uint64_t wire = DocumentedWireBytes(tool, s, count, ranks);
    EXPECT_EQ(static_cast<uint64_t>(row.wire->bytes), wire);
    // An fp32 ring sends 2(N-1)/N (all-reduce) or (N-1)/N (reduce-scatter) of the array.
    const double ring =
        (tool == "all_reduce" ? 2.0 : 1.0) * static_cast<double>(row.size) * (ranks - 1) / ranks;
    double ratio = 0;
    ASSERT_TRUE(absl::SimpleAtod(row.wire->ratio, &ratio)) << row.wire->ratio;
    EXPECT_NEAR(ratio, static_cast<double>(wire) / ring, 1e-4);
  }
}

class EveryCodec : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryCodec, LossyResultsMatchTheDocumentedComputation) {
  for (const std::string tool : {"all_reduce", "reduce_scatter"}) {
    ExpectExactAndDocumented(tool, 2, {.codec = GetParam()});
    ExpectExactAndDocumented(tool, 3, {.codec = GetParam(), .block = 64, .topk_ratio = 0.05});
  }
  // The ring re-encodes partial sums at each hop: its own documented computation, the same bytes.
  for (const std::string tool : {"all_reduce", "reduce_scatter"}) {
    ExpectExactAndDocumented(
        tool, 4, {.codec = GetParam(), .block = 64, .topk_ratio = 0.05, .path = "ring"});
  }
}

INSTANTIATE_TEST_SUITE_P(PerfCompression, EveryCodec,
                         ::testing::Values("fp16", "bf16", "int8", "onebit", "topk"),
                         [](const auto& info) { return info.param; });

TEST(PerfCompression, OverTcp) {
  const Env tcp = {{"WEFT_TRANSPORT", "tcp"}, {"WEFT_SOCKET_IFNAME", "lo"}};
  ExpectExactAndDocumented("all_reduce", 2, {.codec = "int8"}, tcp);
  ExpectExactAndDocumented("reduce_scatter", 2, {.codec = "topk", .topk_ratio = 0.05}, tcp);
}

// The check can fail: a flipped bit in each rank's first element is counted and fails the run.
TEST(PerfCompression, InjectedErrorsAreCounted) {
  const std::string json = TempPath("compressed.json");
  ProcessResult result = RunTool("all_reduce", 2,
                                 {"-b", "4K", "-e", "4K", "-n", "1", "--compression", "int8",
                                  "--inject_errors", "1", "-J", json});
  EXPECT_EQ(result.exit_code, 7) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n");
  ASSERT_EQ(out.rows.size(), 1u) << result.output;
  EXPECT_EQ(out.rows[0].half[0].wrong, 2);
  EXPECT_EQ(out.rows[0].half[1].wrong, 2);
  EXPECT_TRUE(absl::StrContains(result.output, "Test failure: 4 wrong values")) << result.output;
  // The JSON rows carry the wire figures: 2 encoded chunks of 512 elements (4 scales + 512).
  const std::string document = ReadFile(json);
  EXPECT_TRUE(absl::StrContains(document, "\"compression\": \"int8\"")) << document;
  EXPECT_TRUE(absl::StrContains(
      document, "\"wire_bytes\": 1040, \"uncompressed_bytes\": 4096, \"wire_ratio\": 0.25390625"))
      << document;
}

TEST(PerfCompression, OnlyAllReduceAndReduceScatterAcceptIt) {
  for (const std::string tool :
       {"all_gather", "broadcast", "reduce", "alltoall", "sendrecv", "scatter", "gather"}) {
    ProcessResult result = RunTool(tool, 2, {"-b", "1K", "-e", "1K", "--compression", "int8"});
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(absl::StrContains(result.output,
                                  absl::StrCat(tool,
                                               "_perf: --compression is for all_reduce_perf and "
                                               "reduce_scatter_perf only")))
        << result.output;
  }
}

TEST(PerfCompression, UsageErrors) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--compression", "zip"},
           {"--compression", "int8", "-o", "sum"},
           {"--compression", "int8", "-d", "half"},
           {"--compression", "int8", "-P", "1"},
           {"--compression", "topk", "--topk_ratio", "0"},
           {"--compression", "int8", "--compression_block", "0"},
           {"--compression", "int8", "--compression_path", "tree"},
           {"--topk_ratio", "0.1"}}) {
    std::vector<std::string> argv = {ToolPath("all_reduce")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ProcessResult result = RunProcess(argv, {}, Scaled(std::chrono::seconds(20)));
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(flags, " ") << "\n" << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, "USAGE:")) << result.output;
  }
}

}  // namespace
}  // namespace weft::testing
