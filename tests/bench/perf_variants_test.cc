// -V: several algorithms timed side by side in one run, each on a communicator of its own,
// taking turns at every size of every cycle. Run for real under weftrun and read back like a
// user's script; the times are never asserted, the rows' order, names and checks are.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "perf_output.h"
#include "perf_runner.h"
#include "subprocess.h"

namespace weft::testing {
namespace {

TEST(PerfVariants, EachVariantTimesEverySizeOfEveryCycleInTurn) {
  const std::vector<std::string> variants = {"auto", "ring", "shm_direct"};
  ProcessResult result = RunTool("all_reduce", 2,
                                 {"-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-w", "1", "-N",
                                  "2", "-c", "1", "-V", absl::StrJoin(variants, ",")});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const PerfOutput out = ParsePerfOutput(result.output);
  EXPECT_TRUE(out.problems.empty()) << absl::StrJoin(out.problems, "\n") << "\n" << result.output;
  EXPECT_TRUE(out.predicted_header && out.variants_header) << result.output;
  EXPECT_EQ(out.out_of_bounds, 0);
  // 2 cycles x 2 sizes x 3 variants; within each (cycle, size) every variant once, the one that
  // goes first rotating from one size to the next.
  ASSERT_EQ(out.rows.size(), 12u) << result.output;
  for (size_t turn = 0; turn < 4; ++turn) {
    const int64_t size = turn % 2 == 0 ? 1024 : 65536;
    for (size_t k = 0; k < variants.size(); ++k) {
      const PerfRow& row = out.rows[turn * variants.size() + k];
      SCOPED_TRACE(absl::StrCat("turn ", turn, " row ", k));
      EXPECT_EQ(row.size, size);
      EXPECT_EQ(row.variant, variants[(turn + k) % variants.size()]);
      EXPECT_EQ(row.half[0].wrong, 0);
      ASSERT_TRUE(row.prediction.has_value());
      if (row.variant == "auto") {
        EXPECT_TRUE(row.prediction->algorithm == "shm_direct" ||
                    row.prediction->algorithm == "cma_direct")
            << row.prediction->algorithm;
      } else {
        EXPECT_EQ(row.prediction->algorithm, row.variant);
      }
    }
  }
}

}  // namespace
}  // namespace weft::testing
