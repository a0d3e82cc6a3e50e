// The tools' text formatting against nccl-tests' rule and lines, value by value.
#include "gtest/gtest.h"
#include "perf/table.h"
#include "perf_output.h"

namespace weft::perf {
namespace {

TEST(PerfTable, NumbersFollowNcclTestsDecimalsRule) {
  // Time column, 7 wide.
  EXPECT_EQ(FormatNumber(0, 7), "   0.00");
  EXPECT_EQ(FormatNumber(195.4, 7), " 195.40");
  EXPECT_EQ(FormatNumber(9999.994, 7), "9999.99");
  EXPECT_EQ(FormatNumber(12345.67, 7), "12345.7");
  EXPECT_EQ(FormatNumber(123456.7, 7), " 123457");
  EXPECT_EQ(FormatNumber(1234567, 7), "1234567");
  EXPECT_EQ(FormatNumber(12345678, 7), "1.2e+07");
  // Bandwidth columns, 6 wide.
  EXPECT_EQ(FormatNumber(0.004, 6), "  0.00");
  EXPECT_EQ(FormatNumber(171.72, 6), "171.72");
  EXPECT_EQ(FormatNumber(1234.56, 6), "1234.6");
  EXPECT_EQ(FormatNumber(123456, 6), "123456");
  EXPECT_EQ(FormatNumber(1234567, 6), " 1e+06");
}

TEST(PerfTable, ResultHeaderIsNcclTestsHeaderExactly) {
  const std::string expected = std::string("#\n") + testing::kResultHeader[0] + "\n" +
                               testing::kResultHeader[1] + "\n" + testing::kResultHeader[2] + "\n";
  EXPECT_EQ(ResultHeader(false), expected);
  EXPECT_NE(ResultHeader(true).find(testing::kResultHeaderCputime), std::string::npos);
}

TEST(PerfTable, RowsHaveNcclTestsColumns) {
  EXPECT_EQ(RowPreamble(33554432, 8388608, "float", "sum", -1) +
                RowHalf(195.40, 171.72, 300.51, 0) + RowHalf(195.40, 171.73, 300.52, 0),
            "    33554432       8388608     float     sum      -1   195.40  171.72  300.51       0"
            "   195.40  171.73  300.52       0");
  EXPECT_EQ(RowHalf(7.5, 0, 0, std::nullopt), "     7.50    0.00    0.00     N/A");
}

// -P's columns continue nccl-tests' lines; everything left of them is unchanged.
TEST(PerfTable, PredictionColumnsFollowNcclTestsColumns) {
  const std::string expected = std::string("#\n") + testing::kPredictedHeader[0] + "\n" +
                               testing::kPredictedHeader[1] + "\n" + testing::kPredictedHeader[2] +
                               "\n";
  EXPECT_EQ(ResultHeader(false, true), expected);
  EXPECT_EQ(RowPrediction("shm_direct", 1.234, 1.5, 12345.6),
            "    shm_direct     1.23    1.50   12346");
  EXPECT_EQ(RowPrediction("p2p", std::nullopt, std::nullopt, std::nullopt),
            "           p2p      N/A     N/A     N/A");
}

// -V's column ends the middle header line and every row.
TEST(PerfTable, VariantColumnEndsTheLines) {
  const std::string expected = std::string("#\n") + testing::kPredictedHeader[0] + "\n" +
                               testing::kVariantsHeader + "\n" + testing::kPredictedHeader[2] +
                               "\n";
  EXPECT_EQ(ResultHeader(false, true, true), expected);
  EXPECT_EQ(RowVariant("shm_direct"), "  shm_direct");
}

// --compression's columns continue nccl-tests' lines: wire bytes per operation and the ratio.
TEST(PerfTable, WireColumnsFollowNcclTestsColumns) {
  const std::string expected = std::string("#\n") + testing::kCompressedHeader[0] + "\n" +
                               testing::kCompressedHeader[1] + "\n" +
                               testing::kCompressedHeader[2] + "\n";
  EXPECT_EQ(ResultHeader(false, false, false, true), expected);
  EXPECT_EQ(RowWire(1040, 4096), "          1040   0.2539");
  EXPECT_EQ(RowWire(0, 0), "             0      N/A");
}

TEST(PerfTable, FooterMatchesNcclTestsLines) {
  EXPECT_EQ(Footer(0, 39.7695, std::nullopt, "all_reduce_perf"),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 39.7695 \n#\n"
            "# Collective test concluded: all_reduce_perf\n#\n");
  EXPECT_EQ(Footer(2, 1.5, 10.0, "gather_perf"),
            "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 1.5 FAILED\n#\n"
            "# Collective test concluded: gather_perf\n#\n");
  EXPECT_TRUE(BandwidthOk(9.0, 10.0));
  EXPECT_FALSE(BandwidthOk(8.99, 10.0));
}

}  // namespace
}  // namespace weft::perf
