// Gradient compression end to end on two ranks: every codec and PowerSGD send the bytes their ratio
// say and train (the lossless-ish ones close to the uncompressed run), ZeRO's compressed
// reduce-scatters do the same with every stage giving the same bits, warm-up steps are the
// uncompressed run's very bits, the error-feedback state resumes exactly from a checkpoint, and a
// damaged error-feedback file is an error that names it.
#include <tuple>

#include "train_fixture.h"

namespace weft::testing {
namespace {

TEST_F(TrainTest, EveryCodecSendsItsShareAndTrains) {
  ExpectOk(Train(2, "none", {}));
  const std::map<int, std::string> ref_loss = Losses("none");
  const std::map<int, std::string> ref_bytes = Metric("none", "comm_bytes");
  // The most bytes each codec may send, as a share of the uncompressed all-reduce's, and how
  // close its loss must stay after 20 steps.
  const std::vector<std::tuple<const char*, double, double>> codecs = {
      {"fp16", 0.51, 1e-4},  {"bf16", 0.51, 1e-3}, {"int8", 0.27, 1e-2},
      {"onebit", 0.05, 0.2}, {"topk", 0.05, 0.3},  {"powersgd", 0.25, 0.02}};
  for (const auto& [codec, share, tol] : codecs) {
    ExpectOk(Train(2, codec, SetArgs(absl::StrCat("compression=", codec))));
    const std::map<int, std::string> wire = Metric(codec, "wire_bytes");
    ASSERT_EQ(wire.size(), 20u) << codec;
    for (const auto& [step, bytes] : wire) {
      EXPECT_LE(std::stod(bytes), share * std::stod(ref_bytes.at(step))) << codec << " " << step;
      EXPECT_GT(std::stod(bytes), 0) << codec;
    }
    const double a = std::stod(ref_loss.at(20)), b = std::stod(Losses(codec).at(20));
    EXPECT_LE(std::abs(a - b), tol * a) << codec << ": " << b << " vs " << a;
  }
}

TEST_F(TrainTest, ZeroCompressesItsReduceScattersAndEveryStageAgrees) {
  // ZeRO sends its gradients' reduce-scatter and its parameters' all-gathers (one at stages 1-2,
  // each as many bytes as the reduce-scatter; more at stage 3). int8 shrinks the reduce-scatter
  // to between 1/4 and 1/4 + 4/256 of itself; the all-gathers stay fp32.
  for (const char* stage : {"1", "2", "3"}) {
    const std::string none = absl::StrCat("none-zero", stage);
    ExpectOk(Train(2, none, SetArgs(absl::StrCat("zero=", stage))));
    const std::map<int, std::string> ref_bytes = Metric(none, "comm_bytes");
    const std::map<int, std::string> scatter_bytes = Metric("none-zero1", "comm_bytes");
    const std::string out = absl::StrCat("int8-zero", stage);
    ExpectOk(Train(2, out, SetArgs(absl::StrCat("zero=", stage, ",compression=int8"))));
    const std::map<int, std::string> wire = Metric(out, "wire_bytes");
    ASSERT_EQ(wire.size(), 20u) << out;
    for (const auto& [step, bytes] : wire) {
      const double scatter = std::stod(scatter_bytes.at(step)) / 2;
      const double saved = (std::stod(ref_bytes.at(step)) - std::stod(bytes)) / scatter;
      EXPECT_LE(saved, 0.75) << out << " step " << step;
      EXPECT_GE(saved, 0.75 - 4.0 / 256) << out << " step " << step;
    }
    // The same reduce-scatters and updates whatever the stage keeps where.
    EXPECT_EQ(Losses(out), Losses("int8-zero1")) << out;
    EXPECT_EQ(Metric(out, "grad_norm"), Metric("int8-zero1", "grad_norm")) << out;
    const double a = std::stod(Losses(none).at(20)), b = std::stod(Losses(out).at(20));
    EXPECT_LE(std::abs(a - b), 1e-2 * a) << out << ": " << b << " vs " << a;
  }
  const std::map<int, std::string> ref_loss = Losses("none-zero2");
  ExpectOk(Train(2, "onebit", SetArgs("zero=2,compression=onebit")));
  const double a = std::stod(ref_loss.at(20)), b = std::stod(Losses("onebit").at(20));
  EXPECT_LE(std::abs(a - b), 0.2 * a) << b << " vs " << a;
  EXPECT_NE(Losses("onebit").at(20), ref_loss.at(20));
}

TEST_F(TrainTest, CompressionWarmUpStepsAreTheUncompressedRun) {
  ExpectOk(Train(2, "none", {}));
  ExpectOk(Train(2, "warm", SetArgs("compression=int8,compression_warmup_steps=5")));
  const std::map<int, std::string> ref = Losses("none"), got = Losses("warm");
  const std::map<int, std::string> compressed = Metric("warm", "compressed");
  for (int step = 1; step <= 20; ++step) {
    EXPECT_EQ(compressed.at(step), step <= 5 ? "false" : "true") << step;
    // A step's loss comes before its update: the first compressed update shows at step 7.
    if (step <= 6) {
      EXPECT_EQ(got.at(step), ref.at(step)) << step;
    }
  }
  EXPECT_NE(got.at(20), ref.at(20));
}

TEST_F(TrainTest, CompressionErrorFeedbackResumesBitIdentically) {
  for (const char* codec : {"onebit", "topk", "powersgd"}) {
    ExpectResumesOnLayouts({"--steps", "12", "--set", "checkpoint_every=3"}, 2,
                           absl::StrCat("compression=", codec),
                           {{2, absl::StrCat("compression=", codec), true}});
    fs::remove_all(dir_ / "full");
    fs::remove_all(dir_ / "cut");
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().filename().string().starts_with("resume")) fs::remove_all(entry.path());
    }
  }
}

TEST_F(TrainTest, ZeroCompressionErrorFeedbackResumesBitIdentically) {
  ExpectResumesOnLayouts({"--steps", "12", "--set", "checkpoint_every=3"}, 2,
                         "zero=2,compression=topk,topk_ratio=0.1",
                         {{2, "zero=2,compression=topk,topk_ratio=0.1", true}});
}

TEST_F(TrainTest, DamagedErrorFeedbackFileIsAnErrorNamingIt) {
  const std::vector<std::string> args = {
      "--steps", "6", "--set", "checkpoint_every=3", "--set", "compression=onebit"};
  ExpectOk(Train(2, "run", args));
  fs::path file;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "run" / "checkpoints")) {
    if (entry.path().filename() == "compression-rank-00001.bin" &&
        entry.path().parent_path().filename() == "ckpt-00000006") {
      file = entry.path();
    }
  }
  ASSERT_FALSE(file.empty());
  fs::resize_file(file, fs::file_size(file) - 4);
  std::vector<std::string> more = args;
  more[1] = "9";
  more.insert(more.end(), {"--resume", "auto"});
  const ProcessResult r = Train(2, "run", more);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "compression-rank-00001.bin")) << r.output;
}

}  // namespace
}  // namespace weft::testing
