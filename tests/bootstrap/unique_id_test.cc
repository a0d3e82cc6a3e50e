// The unique-id string: round trips, fresh tokens, and strict refusals that never echo the secret.
#include "bootstrap/unique_id.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(UniqueIdTest, RoundTrips) {
  for (const char* host : {"127.0.0.1", "node-07.cluster", "fe80::1", "::1"}) {
    const ParsedUniqueId id{host, 29500, "00ff00ff00ff00ff00ff00ff00ff00ff"};
    const std::string text = FormatUniqueId(id);
    absl::StatusOr<ParsedUniqueId> back = ParseUniqueId(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status();
    EXPECT_EQ(back->host, id.host);
    EXPECT_EQ(back->port, id.port);
    EXPECT_EQ(back->token, id.token);
  }
  EXPECT_EQ(FormatUniqueId({"10.0.0.1", 1, "ab"}), "weft1:10.0.0.1:1:ab");
  EXPECT_EQ(FormatUniqueId({"::1", 65535, "ab"}), "weft1:[::1]:65535:ab");
}

TEST(UniqueIdTest, NewTokensAreFreshHex) {
  const std::string a = NewToken();
  const std::string b = NewToken();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  })) << a;
  EXPECT_NE(a, b);
}

TEST(UniqueIdTest, RefusesMalformedIds) {
  const std::string secret = "deadbeefdeadbeefdeadbeefdeadbee";
  for (const std::string& bad : {
           std::string(""),
           std::string("weft1"),
           "weft2:host:1:" + secret,
           "WEFT1:host:1:" + secret,
           "weft1:" + secret,
           "weft1:host:" + secret,
           "weft1::29500:" + secret,
           "weft1:[]:29500:" + secret,
           "weft1:[::1:29500:" + secret,
           "weft1:ho st:29500:" + secret,
           "weft1:host:0:" + secret,
           "weft1:host:65536:" + secret,
           "weft1:host:+80:" + secret,
           "weft1:host:port:" + secret,
           std::string("weft1:host:29500:"),
           "weft1:host:29500:" + secret + "g",
           "weft1:host:29500:" + std::string(300, 'a'),
       }) {
    absl::StatusOr<ParsedUniqueId> parsed = ParseUniqueId(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "weft1:<host>:<port>:<token hex>"))
        << parsed.status();
    EXPECT_FALSE(absl::StrContains(parsed.status().message(), secret)) << parsed.status();
  }
}

}  // namespace
}  // namespace weft
