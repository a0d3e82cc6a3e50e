// The config reader: flat JSON objects in, every error naming the file and where.
#include "config.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

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
