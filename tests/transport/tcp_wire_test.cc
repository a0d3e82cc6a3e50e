// The TCP transport's pure parts: WEFT_SOCKET_IFNAME filtering and ordering, the published
// listener record, the handshake encoding, the stripe layout and the operation queue.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/interfaces.h"
#include "transport/tcp/listener_record.h"
#include "transport/tcp/ring_queue.h"
#include "transport/tcp/stripe_layout.h"

namespace weft::tcp {
namespace {

InterfaceAddress Iface(const char* name, const char* ip) {
  return InterfaceAddress{name, *SocketAddress::Parse(ip, 0)};
}

std::vector<std::string> Names(const std::vector<InterfaceAddress>& addresses) {
  std::vector<std::string> names;
  for (const InterfaceAddress& a : addresses) names.push_back(a.name);
  return names;
}

TEST(InterfaceFilterTest, FollowsNcclSocketIfnameRules) {
  EXPECT_TRUE(InterfaceFilter("").Matches("eth0"));
  EXPECT_TRUE(InterfaceFilter("eth").Matches("eth0"));
  EXPECT_FALSE(InterfaceFilter("eth").Matches("ib0"));
  EXPECT_TRUE(InterfaceFilter("ib,eth").Matches("eth1"));
  EXPECT_FALSE(InterfaceFilter("^eth,lo").Matches("eth0"));
  EXPECT_FALSE(InterfaceFilter("^eth,lo").Matches("lo"));
  EXPECT_TRUE(InterfaceFilter("^eth,lo").Matches("ib0"));
  EXPECT_TRUE(InterfaceFilter("=eth0").Matches("eth0"));
  EXPECT_FALSE(InterfaceFilter("=eth0").Matches("eth01"));
  EXPECT_FALSE(InterfaceFilter("^=eth0").Matches("eth0"));
  EXPECT_TRUE(InterfaceFilter("^=eth0").Matches("eth01"));
  EXPECT_TRUE(InterfaceFilter(" eth , ib ").Matches("ib3"));
}

TEST(SelectInterfacesTest, PutsLoopbackLastAndKeepsOrderOtherwise) {
  const std::vector<InterfaceAddress> all = {Iface("lo", "127.0.0.1"), Iface("eth0", "10.0.0.1"),
                                             Iface("docker0", "172.17.0.1"),
                                             Iface("ib0", "10.1.0.1")};
  absl::StatusOr<std::vector<InterfaceAddress>> chosen = SelectInterfaces(all, "");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(Names(*chosen), (std::vector<std::string>{"eth0", "docker0", "ib0", "lo"}));
  chosen = SelectInterfaces(all, "^docker");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(Names(*chosen), (std::vector<std::string>{"eth0", "ib0", "lo"}));
  chosen = SelectInterfaces(all, "ib,lo");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(Names(*chosen), (std::vector<std::string>{"ib0", "lo"}));
}

TEST(SelectInterfacesTest, NothingMatchingSaysWhatExistsAndWhatToDo) {
  const std::vector<InterfaceAddress> all = {Iface("lo", "127.0.0.1"), Iface("eth0", "10.0.0.1")};
  absl::StatusOr<std::vector<InterfaceAddress>> chosen = SelectInterfaces(all, "=eth");
  ASSERT_FALSE(chosen.ok());
  const std::string message(chosen.status().message());
  EXPECT_TRUE(absl::StrContains(message, "WEFT_SOCKET_IFNAME='=eth'")) << message;
  EXPECT_TRUE(absl::StrContains(message, "lo 127.0.0.1, eth0 10.0.0.1")) << message;
  EXPECT_TRUE(absl::StrContains(message, "`ip addr`")) << message;
}

TEST(EnumerateInterfacesTest, FindsLoopback) {
  absl::StatusOr<std::vector<InterfaceAddress>> all = EnumerateInterfaces();
  ASSERT_TRUE(all.ok()) << all.status();
  bool loopback = false;
  for (const InterfaceAddress& a : *all) loopback = loopback || a.address.IsLoopback();
  EXPECT_TRUE(loopback);
}

TEST(ListenerRecordTest, RoundTripsAndRejectsGarbage) {
  ListenerRecord record;
  record.host_id = "node7/boot-id\nwith a newline";
  record.addresses = {Iface("eth0", "10.0.0.1"), Iface("lo", "127.0.0.1")};
  record.addresses[0].address.set_port(4242);
  record.addresses[1].address.set_port(4242);
  absl::StatusOr<ListenerRecord> parsed = ParseListenerRecord(FormatListenerRecord(record));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->host_id, record.host_id);
  ASSERT_EQ(parsed->addresses.size(), 2u);
  EXPECT_EQ(parsed->addresses[0].name, "eth0");
  EXPECT_EQ(parsed->addresses[0].address.ToString(), "10.0.0.1:4242");
  EXPECT_TRUE(parsed->addresses[1].address.IsLoopback());

  for (const char* bad :
       {"", "weft-tcp 2\n0\n", "weft-tcp 1\nx\n", "weft-tcp 1\n2\neth0 1.2.3.4 5\n",
        "weft-tcp 1\n1\neth0 1.2.3 5\nhost", "weft-tcp 1\n1\neth0 1.2.3.4\nh",
        "weft-tcp 1\n1\neth0 1.2.3.4 70000\nh"}) {
    EXPECT_FALSE(ParseListenerRecord(bad).ok()) << bad;
  }
}

TEST(HandshakeTest, HelloRoundTrips) {
  const Hello hello{.version = kHandshakeVersion,
                    .from_rank = 3,
                    .to_rank = 9,
                    .stream = 2,
                    .nstreams = 4,
                    .token = "secret",
                    .unique_name = "comm-1"};
  const std::string bytes = EncodeHello(hello);
  ASSERT_EQ(HelloSize(absl::string_view(bytes).substr(0, kHelloFixedBytes)), bytes.size());
  const Hello back = DecodeHello(bytes);
  EXPECT_EQ(back.from_rank, 3);
  EXPECT_EQ(back.to_rank, 9);
  EXPECT_EQ(back.stream, 2u);
  EXPECT_EQ(back.nstreams, 4u);
  EXPECT_EQ(back.token, "secret");
  EXPECT_EQ(back.unique_name, "comm-1");
}

TEST(HandshakeTest, RejectsWhatIsNotAHello) {
  EXPECT_FALSE(HelloSize(std::string(kHelloFixedBytes, 'A')).has_value());
  std::string absurd = EncodeHello(Hello{});
  absurd[24 + 3] = 0x7f;  // token size far beyond kMaxHelloStringBytes
  EXPECT_FALSE(HelloSize(absurd.substr(0, kHelloFixedBytes)).has_value());
}

TEST(HandshakeTest, AcksRoundTrip) {
  for (AckCode code : {AckCode::kAccepted, AckCode::kWrongToken, AckCode::kDuplicateStream}) {
    EXPECT_EQ(DecodeAck(EncodeAck(code)), code);
  }
  EXPECT_FALSE(DecodeAck(std::string(kAckBytes, 'x')).has_value());
  std::string unknown = EncodeAck(AckCode::kAccepted);
  unknown[4] = 99;
  EXPECT_FALSE(DecodeAck(unknown).has_value());
}

// Every byte of the message belongs to exactly one stream's share, in order within the share.
TEST(StripeLayoutTest, SharesCoverTheMessageExactlyOnce) {
  for (int nstreams : {1, 2, 3, 4, 16}) {
    for (size_t bytes : {size_t{0}, size_t{1}, kStripeThresholdBytes - 1, kStripeThresholdBytes,
                         kStripeThresholdBytes + 5, size_t{5} * kStripeChunkBytes,
                         size_t{17} * kStripeChunkBytes + 12345}) {
      const StripeLayout layout(bytes, nstreams);
      EXPECT_EQ(layout.striped(), nstreams > 1 && bytes >= kStripeThresholdBytes);
      std::vector<int> owner(bytes, -1);
      size_t total = 0;
      for (int s = 0; s < nstreams; ++s) {
        const size_t share = layout.ShareBytes(s);
        total += share;
        size_t last_end = 0;
        for (size_t pos = 0; pos < share;) {
          const StripeLayout::Span span = layout.Locate(s, pos);
          ASSERT_GT(span.length, 0u);
          ASSERT_LE(span.offset + span.length, bytes);
          ASSERT_GE(span.offset, last_end);
          for (size_t i = span.offset; i < span.offset + span.length; ++i) {
            ASSERT_EQ(owner[i], -1) << "byte " << i << " in two shares";
            owner[i] = s;
          }
          last_end = span.offset + span.length;
          pos += span.length;
        }
      }
      EXPECT_EQ(total, bytes) << bytes << " bytes over " << nstreams << " streams";
    }
  }
}

TEST(RingQueueTest, KeepsOrderAcrossGrowthAndWrapAround) {
  RingQueue<int> queue;
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round; ++i) queue.push_back(next_in++);
    for (int i = 0; i < round / 2; ++i) {
      ASSERT_EQ(queue[0], next_out++);
      queue.pop_front();
    }
    for (size_t i = 0; i < queue.size(); ++i) ASSERT_EQ(queue[i], next_out + static_cast<int>(i));
  }
}

}  // namespace
}  // namespace weft::tcp
