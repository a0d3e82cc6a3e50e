// weft-trace's reading and diagnosis, on dumps written here: strict JSON, versioned dumps, and
// the culprit it names for a missing rank and for a mismatched collective.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis.h"
#include "dump.h"
#include "gtest/gtest.h"
#include "rank_list.h"
#include "weft/comm/json.h"

namespace weft::trace {
namespace {

TEST(Json, ParsesStrictJsonAndKeepsIntegersExact) {
  absl::StatusOr<JsonValue> v =
      ParseJson(R"({"a": [1, -2.5e1, true, null, "x\u00e9\n"], "ns": 1795951341138514819})");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_NE(v->Find("a"), nullptr);
  EXPECT_EQ(v->Find("a")->items.size(), 5u);
  EXPECT_EQ(v->Find("a")->items[1].number, -25.0);
  EXPECT_EQ(v->Find("a")->items[4].text, "x\xc3\xa9\n");
  EXPECT_EQ(v->Find("ns")->integer, 1795951341138514819);
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "01", "\"\\x\"", "[1] 2", "\"\x01\"", "nul", "\"\\ud800\""}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseJson(std::string(1000, '[')).ok());  // nesting is bounded
  EXPECT_EQ(JsonQuote("a\"b\\\n\t\x01"), "\"a\\\"b\\\\\\n\\t\\u0001\"");
}

std::string Op(int seq, const char* op, int count, const char* state, const char* extra = "") {
  return absl::StrCat(
      R"({"id": )", seq + 1, R"(, "seq": )", seq, R"(, "collective": true, "op": ")", op,
      R"(", "dtype": "float", "reduce_op": "sum", "count": )", count, R"(, "bytes": )", count * 4,
      R"(, "root": -1, "peer": -1, "algorithm": "ring", "state": ")", state,
      R"(", "enqueue_ns": 1000, "start_ns": 2000, "end_ns": 3000)", extra, "}");
}

std::string Dump(int rank, int size, const std::vector<std::string>& ops, int version = 1) {
  std::string text = absl::StrCat(
      R"({"format": "weft-flight-recorder", "version": )", version, R"(, "rank": )", rank,
      R"(, "size": )", size, R"(, "pid": )", 100 + rank,
      R"(, "host": "node", "comm": "c0", "reason": "test", "dumped_ns": 9000, "capacity": 8, )",
      R"("ops": [)");
  for (size_t i = 0; i < ops.size(); ++i) absl::StrAppend(&text, i ? ", " : "", ops[i]);
  return text + "]}";
}

RankDump Parsed(const std::string& text) {
  absl::StatusOr<RankDump> dump = ParseDump(text, "test");
  EXPECT_TRUE(dump.ok()) << dump.status();
  return dump.ok() ? *dump : RankDump{};
}

TEST(Dump, RejectsOtherFormatsVersionsAndAbsurdSizes) {
  EXPECT_FALSE(ParseDump(R"({"format": "other"})", "f").ok());
  absl::StatusOr<RankDump> v2 = ParseDump(Dump(0, 2, {}, 2), "f");
  ASSERT_FALSE(v2.ok());
  EXPECT_TRUE(absl::StrContains(v2.status().message(), "version 2")) << v2.status();
  EXPECT_FALSE(ParseDump(Dump(3, 2, {}), "f").ok());
  EXPECT_FALSE(ParseDump(Dump(0, int{1} << 30, {}), "f").ok());
  EXPECT_FALSE(ParseDump(Dump(0, 2, {R"({"id": 1})"}), "f").ok());
}

TEST(Diagnose, NamesTheRankThatNeverReachedTheOperation) {
  const std::vector<RankDump> dumps = {
      Parsed(Dump(0, 3, {Op(0, "all_reduce", 8, "done"), Op(1, "all_reduce", 8, "running")})),
      Parsed(Dump(1, 3,
                  {Op(0, "all_reduce", 8, "done"),
                   Op(1, "all_reduce", 8, "failed", R"(, "error": "timed out")")})),
      Parsed(Dump(2, 3, {Op(0, "all_reduce", 8, "done")}))};
  const std::string report = Diagnose(dumps);
  EXPECT_TRUE(absl::StrContains(report, "culprit: rank 2 never reached all_reduce #1")) << report;
  EXPECT_TRUE(absl::StrContains(report, "rank 1: timed out")) << report;
  EXPECT_TRUE(absl::StrContains(report, "rank 0: was inside it")) << report;
}

TEST(Diagnose, NamesAMismatchedCollectiveAndAMissingDump) {
  const std::vector<RankDump> dumps = {Parsed(Dump(0, 4, {Op(0, "all_reduce", 4096, "failed")})),
                                       Parsed(Dump(1, 4, {Op(0, "all_reduce", 4096, "failed")})),
                                       Parsed(Dump(3, 4, {Op(0, "all_gather", 1024, "failed")}))};
  const std::string report = Diagnose(dumps);
  EXPECT_TRUE(absl::StrContains(report, "no dump from rank 2")) << report;
  EXPECT_TRUE(absl::StrContains(report,
                                "culprit: mismatched collective: rank 3 called "
                                "all_gather(count=1024, float, sum) as op #0, ranks 0-1 called "
                                "all_reduce(count=4096, float, sum)"))
      << report;
}

TEST(ChromeTrace, IsJsonWithAnEventPerStartedOperation) {
  const std::vector<RankDump> dumps = {
      Parsed(Dump(0, 2, {Op(0, "all_reduce", 8, "done"), Op(1, "barrier", 0, "done")})),
      Parsed(Dump(1, 2, {Op(0, "all_reduce", 8, "done")}))};
  absl::StatusOr<JsonValue> trace = ParseJson(ChromeTrace(dumps));
  ASSERT_TRUE(trace.ok()) << trace.status();
  int slices = 0;
  for (const JsonValue& event : trace->Find("traceEvents")->items) {
    if (event.Find("ph")->text == "X") ++slices;
  }
  EXPECT_EQ(slices, 3);
}

TEST(RankList, CompressesRuns) {
  EXPECT_EQ(RankList({}), "no rank");
  EXPECT_EQ(RankList({3}), "rank 3");
  EXPECT_EQ(RankList({0, 1, 2}), "ranks 0-2");
  EXPECT_EQ(RankList({0, 2, 5, 6, 7}), "ranks 0, 2, 5-7");
}

}  // namespace
}  // namespace weft::trace
