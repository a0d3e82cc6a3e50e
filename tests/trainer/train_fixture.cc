#include "train_fixture.h"

namespace weft::testing {

void ExpectOk(const ProcessResult& r) {
  EXPECT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

void ExpectSameParams(const std::vector<SavedTensor>& ref, const std::vector<SavedTensor>& got,
                      double rel, const std::string& what, double noise_bound) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const auto compare = [&](const std::string& name, const float* a, const float* b, size_t n,
                           bool noise) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(b[i]) - a[i];
      diff += d * d;
      norm += static_cast<double>(a[i]) * a[i];
    }
    EXPECT_LE(std::sqrt(diff), noise ? noise_bound : rel * std::sqrt(norm))
        << what << " " << name << ": difference " << std::sqrt(diff) << ", relative "
        << std::sqrt(diff / norm);
  };
  for (size_t t = 0; t < ref.size(); ++t) {
    const std::string& name = ref[t].info.name;
    ASSERT_EQ(got[t].info, ref[t].info) << what;
    const float* a = ref[t].values.data();
    const float* b = got[t].values.data();
    const size_t size = ref[t].values.size();
    if (name.ends_with("attn.qkv.b")) {  // query | key | value
      const size_t third = size / 3;
      compare(name + " (query)", a, b, third, false);
      compare(name + " (key)", a + third, b + third, third, true);
      compare(name + " (value)", a + 2 * third, b + 2 * third, size - 2 * third, false);
    } else {
      compare(name, a, b, size, false);
    }
  }
}

// Runs the tiny config for 20 steps on one rank, then on each layout, and compares every step's
// loss and gradient norm, and the parameters after the last step, with the single rank's, within
// `tol`.
void TrainTest::ExpectLayoutsMatchSingleRank(const std::vector<Layout>& layouts,
                                             const std::string& common, Tolerance tol) {
  ExpectOk(Train(0, "ref", SetArgs(common)));
  const std::map<int, std::string> ref_loss = Losses("ref");
  const std::map<int, std::string> ref_norm = Metric("ref", "grad_norm");
  ASSERT_EQ(ref_loss.size(), 20u);
  ASSERT_EQ(ref_norm.size(), 20u);
  const std::vector<SavedTensor> ref_state = Checkpoint("ref", 20);
  for (const Layout& layout : layouts) {
    const std::string out = absl::StrCat("r", layout.ranks, "a", layout.accum, "z", layout.zero,
                                         layout.transport, layout.set);
    std::vector<std::string> args = {"--set", absl::StrCat("grad_accum=", layout.accum), "--set",
                                     absl::StrCat("zero=", layout.zero)};
    for (const std::string& a : SetArgs(absl::StrCat(common, ",", layout.set))) args.push_back(a);
    ExpectOk(Train(layout.ranks, out, args, {{"WEFT_TRANSPORT", layout.transport}}));
    for (const auto& [key, ref] : {std::pair{"loss", ref_loss}, std::pair{"grad_norm", ref_norm}}) {
      const std::map<int, std::string> got = Metric(out, key);
      ASSERT_EQ(got.size(), ref.size()) << out << " " << key;
      for (const auto& [step, value] : ref) {
        const double a = std::stod(value);
        const double b = std::stod(got.at(step));
        EXPECT_LE(std::abs(a - b), tol.metrics * std::abs(a))
            << out << " step " << step << " " << key << ": " << value << " vs " << got.at(step);
      }
    }
    ExpectSameParams(ref_state, Checkpoint(out, 20), tol.params, out, tol.noise);
  }
}

void TrainTest::ExpectResumedLosses(const std::string& out, const std::map<int, std::string>& full,
                                    bool exact) {
  const std::map<int, std::string> got = Losses(out);
  ASSERT_EQ(got.size(), 12u) << out;
  for (int step = 7; step <= 12; ++step) {
    if (exact) {
      EXPECT_EQ(got.at(step), full.at(step)) << out << " step " << step;
    } else {
      const double a = std::stod(full.at(step));
      EXPECT_LE(std::abs(std::stod(got.at(step)) - a), kDataParallelRelTol * std::abs(a))
          << out << " step " << step << ": " << got.at(step) << " vs " << full.at(step);
    }
  }
}

void TrainTest::ExpectResumesOnLayouts(const std::vector<std::string>& args, int ranks,
                                       const std::string& first,
                                       const std::vector<Resume>& resumes) {
  std::vector<std::string> run = args;
  for (const std::string& a : SetArgs(first)) run.push_back(a);
  ExpectOk(Train(ranks, "full", run));
  const std::map<int, std::string> full = Losses("full");
  run.insert(run.end(), {"--stop-after", "6"});
  ExpectOk(Train(ranks, "cut", run));
  for (const Resume& resume : resumes) {
    const std::string out = absl::StrCat("resume", resume.ranks, resume.set);
    fs::copy(dir_ / "cut", dir_ / out, fs::copy_options::recursive);
    std::vector<std::string> second = args;
    for (const std::string& a : SetArgs(resume.set)) second.push_back(a);
    second.insert(second.end(), {"--resume", "auto"});
    ExpectOk(Train(resume.ranks, out, second));
    ExpectResumedLosses(out, full, resume.exact);
  }
}

// 200 steps of the baby config (12 sequences of 64 tokens, 0.83 M parameters): each layout's loss
// within 1e-4 of one rank's at every step, as fp32 summation orders drift apart over the run.
void TrainTest::ExpectBabyLossesFollowSingleRank(const std::vector<Layout>& layouts) {
  config_ = BABY_CONFIG;
  const std::vector<std::string> args = {"--steps",      "200",   "--set",
                                         "eval_every=0", "--set", "checkpoint_every=0"};
  ExpectOk(Train(0, "ref", args));
  const std::map<int, std::string> ref = Losses("ref");
  ASSERT_EQ(ref.size(), 200u);
  for (const Layout& layout : layouts) {
    const std::string out = absl::StrCat("r", layout.ranks, "z", layout.zero, layout.set);
    std::vector<std::string> run = args;
    run.insert(run.end(), {"--set", absl::StrCat("zero=", layout.zero), "--set", layout.set});
    ExpectOk(Train(layout.ranks, out, run));
    const std::map<int, std::string> got = Losses(out);
    ASSERT_EQ(got.size(), ref.size()) << out;
    double worst = 0;
    for (const auto& [step, value] : ref) {
      const double a = std::stod(value);
      worst = std::max(worst, std::abs(std::stod(got.at(step)) - a) / std::abs(a));
    }
    EXPECT_LE(worst, 1e-4) << out << ": worst relative loss difference over 200 steps";
    std::printf("%s: worst relative loss difference %.3g\n", out.c_str(), worst);
  }
}

}  // namespace weft::testing
