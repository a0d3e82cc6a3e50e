// The config reader: flat JSON objects in, every error naming the file and where.
#include "config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace weft::trainer {
namespace {

TEST(ConfigTest, ReadsNumbersAndStringsAndRoundTrips) {
  absl::StatusOr<Config> config = ParseConfig(
      R"({"n_layer": 3, "lr": 2.5e-4, "data": "tiny\"shakespeare", "seed": 18446744073709551615})",
      "inline");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->n_layer, 3);
  EXPECT_EQ(config->lr, 2.5e-4);
  EXPECT_EQ(config->data, "tiny\"shakespeare");
  EXPECT_EQ(config->seed, 18446744073709551615u);

  absl::StatusOr<Config> again = ParseConfig(ToJson(*config), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToJson(*again), ToJson(*config));
}

TEST(ConfigTest, ShardGroupNodeRoundTripsAndNeedsZero) {
  absl::StatusOr<Config> config = ParseConfig(R"({"zero": 2, "shard_group": "node"})", "inline");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->shard_group, kShardGroupNode);
  EXPECT_TRUE(absl::StrContains(ToJson(*config), "\"shard_group\": \"node\""));
  absl::StatusOr<Config> again = ParseConfig(ToJson(*config), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->shard_group, kShardGroupNode);
  EXPECT_TRUE(Validate(*config, 4).ok());

  Config plain = *config;
  plain.zero = 0;
  EXPECT_TRUE(
      absl::StrContains(Validate(plain, 4).message(),
                        "shard_group=node shards optimizer state: it needs zero=1, 2 or 3"));
  ASSERT_TRUE(ApplyOverride(&plain, "shard_group=-2").ok());
  EXPECT_TRUE(absl::StrContains(Validate(plain, 4).message(), "shard_group must be a number"));
}

TEST(ConfigTest, CompressionNeedsAFullShardGroupAndTheFp32Wire) {
  struct Case {
    const char* sets;
    const char* says;  // null: valid
  };
  const Case cases[] = {
      {"zero=2,compression=int8", nullptr},
      {"zero=3,compression=topk,shard_group=4", nullptr},
      {"zero=2,compression=int8,shard_group=2", "hybrid sharding's replica all-reduces"},
      {"zero=1,compression=onebit,shard_group=node", "needs one shard group of every"},
      {"zero=1,compression=powersgd", "compression=powersgd needs zero=0"},
      {"compression=bf16,grad_reduce_dtype=bf16", "needs grad_reduce_dtype=fp32"},
  };
  for (const Case& c : cases) {
    Config config;
    for (const absl::string_view set : absl::StrSplit(c.sets, ',')) {
      ASSERT_TRUE(ApplyOverride(&config, std::string(set)).ok()) << set;
    }
    const absl::Status s = Validate(config, 4);
    if (c.says == nullptr) {
      EXPECT_TRUE(s.ok()) << c.sets << ": " << s;
    } else {
      EXPECT_TRUE(absl::StrContains(s.message(), c.says)) << c.sets << ": " << s;
    }
  }
}

// Each mesh check on its own, then all of them at once: a config that does not fit lists every
// reason, not only the first.
TEST(ConfigTest, MeshChecksEachSayWhy) {
  struct Case {
    std::vector<const char*> sets;
    int world;
    const char* says;
  };
  const Case cases[] = {
      {{"tp=2", "dp=3"}, 4, "the world size (4 ranks) must equal dp × tp × pp (3 × 2 × 1 = 6)"},
      {{"tp=3"}, 4, "the world size (4 ranks) must be a multiple of tp × pp (3 × 1 = 3)"},
      {{"tp=0"}, 4, "tp must be >= 1"},
      {{"pp=2", "n_layer=3"}, 2, "n_layer (3) must be divisible by pp × pp_chunks (2 × 1 = 2)"},
      {{"pp=2", "zero=2"}, 2, "zero=2 with pp > 1"},
      {{"pp_chunks=2"}, 1, "the interleaved schedule needs pp_chunks >= 2, the others 1"},
      {{"pp=2", "pp_schedule=interleaved", "pp_chunks=2", "micro_batches=3", "batch_size=6"},
       2,
       "micro_batches (3) must be divisible by pp (2) for the interleaved schedule"},
      {{"pp=2", "micro_batches=5"},
       2,
       "batch share (12 sequences) must be divisible by micro_batches (5)"},
      {{"micro_batches=2"}, 1, "micro_batches=2 needs pp > 1"},
      {{"pp_schedule=zigzag"}, 1, "pp_schedule must be gpipe, 1f1b or interleaved"},
      {{"recompute=some"}, 1, "recompute must be none, selective or full"},
      {{"dp=-1"}, 4, "dp must be >= 0"},
      {{"tp=4", "n_head=2", "n_embd=64"}, 4, "n_head (2) must be divisible by tp (4)"},
      {{"tp=4", "n_head=4", "n_embd=34"}, 4, "n_embd (34) must be divisible by tp (4)"},
      {{"tp=8", "n_head=8", "n_embd=33"},
       8,
       "the MLP width 4·n_embd (132) must be divisible by tp (8)"},
      {{"tp=3", "n_head=3", "n_embd=48"}, 3, "the vocabulary (256) must be divisible by tp (3)"},
      {{"tp=2", "batch_size=6", "grad_accum=2"},
       4,
       "batch_size (6, global) must be divisible by dp × grad_accum (2 × 2 = 4)"},
      {{"tp=2", "sequence_parallel=yes"}, 2, "sequence_parallel must be true or false"},
      {{"tp=4", "n_head=4", "seq_len=18", "sequence_parallel=true"},
       4,
       "sequence_parallel: seq_len (18) must be divisible by tp (4)"},
      {{"tp=2", "zero=1", "shard_group=2", "batch_size=6"},
       6,
       "shard_group (2) must divide the data-parallel ranks (3)"},
  };
  for (const Case& c : cases) {
    Config config;
    for (const char* set : c.sets) ASSERT_TRUE(ApplyOverride(&config, set).ok()) << set;
    const absl::Status s = Validate(config, c.world);
    EXPECT_TRUE(absl::StrContains(s.message(), c.says)) << c.says << "\n got: " << s;
  }
  Config fits;
  for (const char* set : {"tp=2", "dp=2", "n_head=4", "sequence_parallel=true"}) {
    ASSERT_TRUE(ApplyOverride(&fits, set).ok());
  }
  EXPECT_TRUE(Validate(fits, 4).ok()) << Validate(fits, 4);
  EXPECT_EQ(fits.data_parallel(4), 2);
  EXPECT_EQ(fits.micro_batch(4), 6);

  Config all;
  for (const char* set : {"tp=3", "n_head=4", "n_embd=128", "batch_size=7"}) {
    ASSERT_TRUE(ApplyOverride(&all, set).ok());
  }
  const std::string message(Validate(all, 6).message());
  for (const char* says :
       {"n_head (4) must be divisible by tp (3)", "n_embd (128) must be divisible by tp (3)",
        "the MLP width 4·n_embd (512) must be divisible by tp (3)",
        "the vocabulary (256) must be divisible by tp (3)",
        "batch_size (7, global) must be divisible by dp × grad_accum (2 × 1 = 2)"}) {
    EXPECT_TRUE(absl::StrContains(message, says)) << says << "\n got: " << message;
  }
}

TEST(ConfigTest, ErrorsNameTheSourceAndWhere) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"{\n  \"n_layer\": 3,\n  \"lr\" 1\n}", "cfg.json: JSON at line 3, column 8: expected ':'"},
      {R"({"n_layer": 3.5})", "cfg.json: config key \"n_layer\": \"3.5\" is not an integer"},
      {R"({"n_layer": "3"})", "is not an integer"},
      {R"({"layers": 3})", "unknown config key \"layers\""},
      {R"({"n_layer": [3]})", "values are strings, numbers or booleans"},
      {R"([1, 2])", "a config is one JSON object"},
      {R"({"n_layer": 3} extra)", "text after the document"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Config> config = ParseConfig(c.text, "cfg.json");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(config.status().message(), c.says))
        << c.text << " -> " << config.status();
  }
}

}  // namespace
}  // namespace weft::trainer
