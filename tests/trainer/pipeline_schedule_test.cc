// Pipeline schedules: every generator complete and deadlock-free over a grid of sizes, activation
// peaks and unit-cost bubbles against the theory, and the checker's messages on broken schedules.
#include "pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace weft::trainer {
namespace {

constexpr int kStages[] = {1, 2, 3, 4, 8};

PipeAction F(int micro_batch, int chunk = 0) { return {PipeOp::kForward, micro_batch, chunk}; }
PipeAction B(int micro_batch, int chunk = 0) { return {PipeOp::kBackward, micro_batch, chunk}; }

// A hand-written one-chunk schedule.
PipeSchedule Schedule(int micro_batches, std::vector<std::vector<PipeAction>> actions) {
  return {"hand", static_cast<int>(actions.size()), micro_batches, 1, std::move(actions)};
}

void ExpectValid(const PipeSchedule& s) {
  absl::Status status = CheckSchedule(s);
  EXPECT_TRUE(status.ok()) << s.name << " p=" << s.stages << " m=" << s.micro_batches
                           << " v=" << s.chunks << ": " << status << "\n"
                           << Describe(s);
}

void ExpectError(const PipeSchedule& s, const std::string& message) {
  absl::Status status = CheckSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message) << Describe(s);
}

TEST(PipeScheduleTest, GeneratorsAreCompleteAndDeadlockFree) {
  for (int p : kStages) {
    for (int m = 1; m <= 16; ++m) {
      ExpectValid(GPipeSchedule(p, m));
      ExpectValid(OneFOneBSchedule(p, m));
      if (m % p != 0) continue;
      for (int v : {2, 3}) ExpectValid(InterleavedSchedule(p, m, v));
    }
  }
}

TEST(PipeScheduleTest, DescribeListsEachStage) {
  EXPECT_EQ(Describe(OneFOneBSchedule(2, 3)),
            "stage 0: F0.0 F1.0 B0.0 F2.0 B1.0 B2.0\n"
            "stage 1: F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
  EXPECT_EQ(Describe(InterleavedSchedule(2, 2, 2)),
            "stage 0: F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0\n"
            "stage 1: F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

TEST(PipeScheduleTest, PeakActivations) {
  for (int p : kStages) {
    for (int m = 1; m <= 16; ++m) {
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(PeakActivations(GPipeSchedule(p, m), s), m) << "p=" << p << " s=" << s;
        EXPECT_EQ(PeakActivations(OneFOneBSchedule(p, m), s), std::min(p - s, m))
            << "p=" << p << " m=" << m << " s=" << s;
      }
      if (m % p != 0) continue;
      // Counted in chunks, each 1/v of the stage's blocks: stage 0 holds its warm-up
      // 2(p−1) + (v−1)p forwards plus the first steady one, p·v + p − 1 chunks (the table's
      // p·(1 + (p−1)/(p·v)) micro-batches of the whole stage), at most GPipe's m micro-batches of
      // v chunks each (reached when m == p: all forwards first).
      for (int v : {2, 3}) {
        const int peak = PeakActivations(InterleavedSchedule(p, m, v), 0);
        EXPECT_EQ(peak, std::min(p * v + p - 1, m * v)) << "p=" << p << " m=" << m << " v=" << v;
        EXPECT_LE(peak, v * PeakActivations(GPipeSchedule(p, m), 0));
      }
    }
  }
  EXPECT_EQ(PeakActivations(GPipeSchedule(2, 4), 2), 0);
}

TEST(PipeScheduleTest, GPipeAndOneFOneBBubbleMatchesTheory) {
  for (int p : kStages) {
    for (int m = 1; m <= 16; ++m) {
      const double theory = (p - 1.0) / (m + p - 1.0);
      for (const PipeSchedule& s : {GPipeSchedule(p, m), OneFOneBSchedule(p, m)}) {
        const PipeTimeline t = SimulateSchedule(s, 1, 2);
        EXPECT_NEAR(t.bubble_fraction, theory, 1e-9) << s.name << " p=" << p << " m=" << m;
        EXPECT_NEAR(TheoreticalBubble(s), theory, 1e-15);
        EXPECT_DOUBLE_EQ(t.makespan, 3.0 * (m + p - 1)) << s.name << " p=" << p << " m=" << m;
        ASSERT_EQ(t.busy.size(), static_cast<size_t>(p));
        for (double busy : t.busy) EXPECT_DOUBLE_EQ(busy, 3.0 * m);
      }
    }
  }
}

// The stated theory (p−1)/(m+p−1)/v counts the p−1 fill steps at a whole stage's cost divided by
// v. A replay with per-chunk costs (forward 1, backward 2) measures exactly (p−1)/(m·v + p−1):
// the fill still takes p−1 chunk steps each way, i.e. (p−1)(F+B) idle per stage, the paper's
// bubble time (p−1)/(v·m) of the ideal. So the stated formula is a lower bound, short by
// (v−1)(p−1)² / (v(m+p−1)(m·v+p−1)): at most 0.0710 here (p = m = 8, v = 2), shrinking like
// 1/m². The test pins the exact law to 1e-9 and the stated one as a bound within 0.075.
TEST(PipeScheduleTest, InterleavedBubbleBeatsOneFOneB) {
  double widest = 0;
  for (int p : kStages) {
    for (int m = p; m <= 16; m += p) {
      const double one_f_one_b = SimulateSchedule(OneFOneBSchedule(p, m), 1, 2).bubble_fraction;
      for (int v : {2, 3}) {
        const PipeSchedule s = InterleavedSchedule(p, m, v);
        const double bubble = SimulateSchedule(s, 1, 2).bubble_fraction;
        const double stated = TheoreticalBubble(s);
        std::printf("p=%d m=%2d v=%d: interleaved %.6f, 1f1b %.6f, (p-1)/(m+p-1)/v %.6f\n", p, m, v,
                    bubble, one_f_one_b, stated);
        // One stage has no bubble under any schedule.
        if (p > 1) {
          EXPECT_LT(bubble, one_f_one_b) << "p=" << p << " m=" << m << " v=" << v;
        }
        EXPECT_NEAR(bubble, (p - 1.0) / (m * v + p - 1.0), 1e-9);
        EXPECT_GE(bubble, stated - 1e-12);
        EXPECT_LE(bubble - stated, 0.075);
        widest = std::max(widest, bubble - stated);
      }
    }
  }
  std::printf("largest gap to (p-1)/(m+p-1)/v: %.6f\n", widest);
}

TEST(PipeScheduleCheckTest, MissingForward) {
  ExpectError(Schedule(2, {{F(0), F(1), B(0), B(1)}, {F(0), B(0), B(1)}}),
              "stage 1: the forward of micro-batch 1, chunk 0 is missing");
  PipeSchedule s = InterleavedSchedule(2, 4, 2);
  std::erase(s.actions[0], F(3, 1));
  ExpectError(s, "stage 0: the forward of micro-batch 3, chunk 1 is missing");
}

TEST(PipeScheduleCheckTest, DuplicatedBackward) {
  PipeSchedule s = OneFOneBSchedule(2, 4);
  s.actions[1].push_back(B(2));
  ExpectError(s, "stage 1: the backward of micro-batch 2, chunk 0 runs twice (actions 5 and 8)");
}

TEST(PipeScheduleCheckTest, BackwardBeforeItsForward) {
  ExpectError(Schedule(2, {{F(0), F(1), B(0), B(1)}, {F(0), B(1), B(0), F(1)}}),
              "stage 1: the backward of micro-batch 1, chunk 0 (action 1) runs before its "
              "forward (action 3)");
}

TEST(PipeScheduleCheckTest, OutOfRange) {
  PipeSchedule s = InterleavedSchedule(2, 2, 2);
  s.actions[1][3].chunk = 2;
  ExpectError(s,
              "stage 1: action 3 (forward of micro-batch 1, chunk 2) is out of range: 2 chunks, "
              "2 micro-batches");
  s = GPipeSchedule(2, 2);
  s.actions[0][0].micro_batch = -1;
  ExpectError(s,
              "stage 0: action 0 (forward of micro-batch -1, chunk 0) is out of range: 1 chunks, "
              "2 micro-batches");
}

TEST(PipeScheduleCheckTest, ShapeErrors) {
  PipeSchedule s = GPipeSchedule(3, 2);
  s.actions.pop_back();
  ExpectError(s, "the schedule has 2 action lists for 3 stages");
  s.stages = 0;
  ExpectError(s, "stages (0), micro-batches (2) and chunks (1) must be at least 1");
}

TEST(PipeScheduleCheckTest, TwoStagesWaitingOnEachOther) {
  // Stage 1 starts with micro-batch 1, which stage 0 sends only after its backward of
  // micro-batch 0, which needs stage 1's backward of micro-batch 0.
  ExpectError(Schedule(2, {{F(0), B(0), F(1), B(1)}, {F(1), F(0), B(0), B(1)}}),
              "deadlock: stage 0 waits at action 1 (backward of micro-batch 0, chunk 0) for "
              "stage 1's backward of micro-batch 0, chunk 0 (its action 2); stage 1 waits at "
              "action 0 (forward of micro-batch 1, chunk 0) for stage 0's forward of "
              "micro-batch 1, chunk 0 (its action 2)");
}

// Stage 1 takes its forwards in the other order than stage 0 sends them: no deadlock when sends
// never block, but channels that match transfers in order would hand it the wrong micro-batch.
TEST(PipeScheduleCheckTest, ChannelsCarryTransfersInOneOrder) {
  ExpectError(Schedule(2, {{F(0), F(1), B(0), B(1)}, {F(1), F(0), B(0), B(1)}}),
              "stage 0 sends activations to stage 1 in another order than it receives them: "
              "transfer 0 is micro-batch 0 of virtual stage 0, received as micro-batch 1 of "
              "virtual stage 0");
}

TEST(PipeScheduleCheckTest, DeadlockListsEveryWaitingStage) {
  // Stage 0 waits for a backward before sending the forward stage 1 needs; stage 2, downstream,
  // runs micro-batch 0 and then waits too. With two warm-up forwards on stage 0 everything runs.
  PipeSchedule s =
      Schedule(2, {{F(0), B(0), F(1), B(1)}, {F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1), B(1)}});
  ExpectError(s,
              "deadlock: stage 0 waits at action 1 (backward of micro-batch 0, chunk 0) for "
              "stage 1's backward of micro-batch 0, chunk 0 (its action 2); stage 1 waits at "
              "action 1 (forward of micro-batch 1, chunk 0) for stage 0's forward of "
              "micro-batch 1, chunk 0 (its action 2); stage 2 waits at action 2 (forward of "
              "micro-batch 1, chunk 0) for stage 1's forward of micro-batch 1, chunk 0 (its "
              "action 1)");
  s.actions[0] = {F(0), F(1), B(0), B(1)};
  ExpectValid(s);
}

TEST(PipeScheduleCheckTest, OneStageWaitingOnItsNextChunk) {
  PipeSchedule s = InterleavedSchedule(1, 1, 2);
  std::swap(s.actions[0][0], s.actions[0][1]);
  ExpectError(s,
              "deadlock: stage 0 waits at action 0 (forward of micro-batch 0, chunk 1) for "
              "stage 0's forward of micro-batch 0, chunk 0 (its action 1)");
}

}  // namespace
}  // namespace weft::trainer
