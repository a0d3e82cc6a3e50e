// weft-train: trains the reference GPT on one process or, under a launcher (weftrun -n N),
// data parallel over N ranks.
//
//   weft-train --config configs/baby.json [--set key=value]... [--steps N] [--out DIR]
//              [--resume auto] [--stop-after K]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "trainer.h"
#include "weft/comm/communicator.h"

namespace {

constexpr char kUsage[] =
    "usage: weft-train --config FILE [--set key=value]... [--steps N] [--out DIR]\n"
    "                  [--resume auto] [--stop-after K]\n"
    "  --config FILE    flat JSON of training settings (configs/tiny.json, configs/baby.json)\n"
    "  --set key=value  override one setting (repeatable), e.g. --set lr=3e-4\n"
    "  --steps N        total optimizer steps (the LR schedule's length)\n"
    "  --out DIR        metrics.jsonl, checkpoints/run-NNN/, loss.png (default: runs/train);\n"
    "                   each run without --resume gets the next run-NNN, older runs are kept\n"
    "  --resume auto    continue the newest run under DIR from its newest valid checkpoint\n"
    "  --stop-after K   end this invocation after step K with a checkpoint (the schedule still\n"
    "                   spans --steps; resume later with --resume auto)\n"
    "Under weftrun -n N (or torchrun, mpirun, srun) the run is data parallel over N ranks.\n";

int Fail(const absl::Status& status, int rank) {
  std::fprintf(stderr, "weft-train (rank %d): %s\n", rank, std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;
  weft::trainer::TrainOptions options;
  options.out_dir = "runs/train";
  int steps = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--config" && has_value) {
      config_path = argv[++i];
    } else if (arg == "--set" && has_value) {
      overrides.push_back(argv[++i]);
    } else if (arg == "--steps" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &steps) || steps < 1) {
        std::fprintf(stderr, "weft-train: --steps needs a positive integer, got %s\n", argv[i]);
        return 2;
      }
    } else if (arg == "--out" && has_value) {
      options.out_dir = argv[++i];
    } else if (arg == "--resume" && has_value) {
      if (std::strcmp(argv[++i], "auto") != 0) {
        std::fprintf(stderr, "weft-train: --resume takes \"auto\", got %s\n", argv[i]);
        return 2;
      }
      options.resume = true;
    } else if (arg == "--stop-after" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &options.stop_after) || options.stop_after < 1) {
        std::fprintf(stderr, "weft-train: --stop-after needs a positive integer, got %s\n",
                     argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "weft-train: unknown or incomplete argument %s\n%s", arg.c_str(),
                   kUsage);
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "weft-train: --config FILE is required\n%s", kUsage);
    return 2;
  }
  absl::StatusOr<weft::trainer::Config> config = weft::trainer::LoadConfig(config_path);
  if (!config.ok()) return Fail(config.status(), 0);
  for (const std::string& assignment : overrides) {
    if (absl::Status s = weft::trainer::ApplyOverride(&*config, assignment); !s.ok()) {
      return Fail(s, 0);
    }
  }
  if (steps > 0) config->steps = steps;

  // A launcher's variables make this a data-parallel job; without any it is a single process.
  std::unique_ptr<weft::Communicator> comm;
  absl::StatusOr<std::unique_ptr<weft::Communicator>> created =
      weft::Communicator::CreateFromEnvironment();
  if (created.ok()) {
    comm = std::move(*created);
  } else if (!absl::IsNotFound(created.status())) {
    return Fail(created.status(), 0);
  }
  const int rank = comm == nullptr ? 0 : comm->rank();
  absl::StatusOr<weft::trainer::TrainSummary> summary =
      weft::trainer::Train(*config, comm.get(), options);
  if (!summary.ok()) {
    // A failed rank must not leave the others waiting for it until their timeout.
    if (comm != nullptr) comm->Abort();
    return Fail(summary.status(), rank);
  }
  return 0;
}
