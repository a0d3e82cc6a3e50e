#include "perf/perf_tool.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "perf/benchmark.h"
#include "perf/compressed.h"
#include "perf/device_report.h"
#include "perf/json_report.h"
#include "perf/options.h"
#include "perf/report.h"
#include "perf/table.h"
#include "perf/watchdog.h"
#include "weft/comm/communicator.h"
#include "weft/topology/host.h"

namespace weft::perf {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitError = 3;
constexpr int kExitResults = 7;

// nccl-tests' version whose output format the tools reproduce.
constexpr char kNcclTestsVersion[] = "2.19.6";

std::string HeaderLines(const Options& o, const std::string& program) {
  std::string text =
      absl::StrFormat("# nccl-tests version %s weft=%s\n", kNcclTestsVersion, WEFT_VERSION_STRING);
  absl::StrAppend(&text, "# Collective test starting: ", program, "\n");
  const bool factor = o.step_factor > 1;
  absl::StrAppendFormat(
      &text,
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup "
      "iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
      1, 1, o.min_bytes, o.max_bytes, factor ? static_cast<size_t>(o.step_factor) : o.step_bytes,
      factor ? "factor" : "bytes", o.warmup_iters, o.iters, o.agg_iters, o.check, 0, o.unalign);
  if (o.blocking == 1) {
    absl::StrAppend(&text,
                    "# Blocking Enabled: wait for completion and barrier after each collective \n");
  } else if (o.blocking == 2) {
    absl::StrAppend(
        &text, "# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  }
  if (o.compression) {
    const CompressionOptions& c = *o.compression;
    absl::StrAppend(&text, "# Compression: ", Name(c.codec),
                    c.codec == Codec::kTopK ? absl::StrCat(" ratio ", c.topk_ratio)
                    : c.codec == Codec::kInt8 || c.codec == Codec::kSign
                        ? absl::StrCat(" block ", c.block)
                        : "",
                    ", the average over ranks; algbw and busbw on the uncompressed size\n");
  }
  absl::StrAppend(&text, "#\n");
  return text;
}

// NCCL_TESTS_MIN_BW in GB/s, when set.
absl::StatusOr<std::optional<double>> MinimumBandwidth() {
  const char* text = std::getenv("NCCL_TESTS_MIN_BW");
  if (text == nullptr) return std::nullopt;
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL_TESTS_MIN_BW='", text, "' is not a bandwidth in GB/s"));
  }
  return value;
}

// One run of a tool on one rank.
class Tool {
 public:
  Tool(const Collective& collective, const Options& options, std::optional<double> min_bw)
      : collective_(collective),
        options_(options),
        min_bw_(min_bw),
        program_(absl::StrCat(collective.name(), "_perf")),
        watchdog_(options.timeout_s) {}

  int Run(const std::vector<std::string>& notes) {
    CommOptions comm_options;
    comm_options.algorithm =
        options_.variants.empty() ? options_.algorithm : options_.variants.front();
    // -R puts every rank's buffers in AllocShared memory: the tuner should know (as
    // nccl-tests' -R registers buffers with the communicator).
    comm_options.shared_buffers = options_.local_register != 0;
    // The communicator's own bound (creation included) follows -T unless WEFT_TIMEOUT says.
    if (options_.timeout_s > 0 && std::getenv("WEFT_TIMEOUT") == nullptr) {
      comm_options.timeout = absl::Seconds(options_.timeout_s);
    }
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        Communicator::CreateFromEnvironment(comm_options);
    if (!comm.ok()) {
      // The rank is unknown: every process reports, on stdout like nccl-tests' failures.
      std::printf("# error: %s\n", Explain(comm.status()).c_str());
      return ExitCodeFor(comm.status());
    }
    comm_ = std::move(*comm);
    watchdog_.Watch({comm_.get()});
    const int status = RunWithCommunicator(notes, comm_options);
    watchdog_.Watch({});
    variant_comms_.clear();
    comm_.reset();
    return status;
  }

 private:
  bool leader() const { return comm_->rank() == 0; }

  // -V: the first variant runs on comm_; each other one on a child of it that forces it.
  absl::StatusOr<std::vector<Variant>> MakeVariants(const CommOptions& comm_options) {
    if (options_.variants.empty()) return std::vector<Variant>{{"", comm_.get()}};
    std::vector<Variant> variants = {{options_.variants.front(), comm_.get()}};
    std::vector<Communicator*> watched = {comm_.get()};
    for (size_t i = 1; i < options_.variants.size(); ++i) {
      CommOptions forced = comm_options;
      forced.algorithm = options_.variants[i];
      absl::StatusOr<std::unique_ptr<Communicator>> child = comm_->Split(0, comm_->rank(), forced);
      if (!child.ok()) {
        return absl::Status(child.status().code(), absl::StrCat("variant ", options_.variants[i],
                                                                ": ", child.status().message()));
      }
      variant_comms_.push_back(*std::move(child));
      variants.push_back({options_.variants[i], variant_comms_.back().get()});
      watched.push_back(variant_comms_.back().get());
    }
    watchdog_.Watch(std::move(watched));
    return variants;
  }

  int RunWithCommunicator(const std::vector<std::string>& notes, const CommOptions& comm_options) {
    if (leader()) {
      for (const std::string& note : notes) {
        std::fprintf(stderr, "%s: %s\n", program_.c_str(), note.c_str());
      }
      OpenJson();
      std::printf("%s", HeaderLines(options_, program_).c_str());
    }
    absl::StatusOr<std::vector<RankInfo>> devices = GatherRankInfo(*comm_);
    if (!devices.ok()) return Finish(nullptr, devices.status());
    absl::StatusOr<std::vector<Variant>> variants = MakeVariants(comm_options);
    if (!variants.ok()) return Finish(nullptr, variants.status());
    if (leader()) {
      std::printf("# Using devices\n");
      for (const RankInfo& info : *devices) std::printf("%s", DeviceLine(info).c_str());
      std::printf("%s", ResultHeader(options_.report_cputime, options_.predicted,
                                     !options_.variants.empty(), options_.compression.has_value())
                            .c_str());
      if (json_ != nullptr) {
        json_->SetRun(options_, program_, comm_->size());
        json_->SetDevices(*devices);
      }
    }
    Report report(leader(), json_.get());
    Benchmark benchmark(*std::move(variants), options_, collective_, report);
    return Finish(&report, benchmark.Run());
  }

  void OpenJson() {
    if (options_.output_file.empty()) return;
    absl::StatusOr<std::unique_ptr<JsonReport>> json = JsonReport::Create(options_.output_file);
    if (!json.ok()) {
      std::printf("# skipping json output; %s not accessible (%s)\n", options_.output_file.c_str(),
                  std::string(json.status().message()).c_str());
      return;
    }
    json_ = *std::move(json);
    std::printf("# Writing JSON output to %s\n", json_->path().c_str());
  }

  // The footer, the JSON document and the exit status. `report` is null when the run failed
  // before the table began.
  int Finish(const Report* report, absl::Status status) {
    const int out_of_bounds = report != nullptr ? report->out_of_bounds() : 0;
    double average = report != nullptr ? report->average_busbw() : 0;
    // Every rank judges the bandwidth rank 0 printed (with -a 0 the ranks' own times differ).
    if (status.ok() && min_bw_.has_value()) {
      if (absl::Status s = comm_->Broadcast(&average, &average, 1, DataType::kFloat64, 0).Wait();
          !s.ok()) {
        status = absl::Status(s.code(), absl::StrCat("sharing rank 0's average: ", s.message()));
      }
    }
    const bool bandwidth_ok = !min_bw_ || BandwidthOk(average, *min_bw_);
    std::vector<std::string> reasons;
    if (report != nullptr && report->wrong_total() > 0) {
      reasons.push_back(absl::StrCat(report->wrong_total(), " wrong values"));
    }
    if (status.ok() && !bandwidth_ok) {
      reasons.push_back(absl::StrFormat(
          "average bus bandwidth %g GB/s is below 0.9 x NCCL_TESTS_MIN_BW (%g GB/s)", average,
          *min_bw_));
    }
    const std::string error = status.ok() ? "" : Explain(status);
    if (leader()) {
      if (report != nullptr) {
        std::printf("%s", Footer(out_of_bounds, average, min_bw_, program_).c_str());
      }
      std::printf("%s\n", error.empty() ? "" : absl::StrCat("# error: ", error).c_str());
      if (!reasons.empty()) {
        std::printf(" .. %s pid %d: Test failure: %s\n", HostName().c_str(), getpid(),
                    absl::StrJoin(reasons, "; ").c_str());
      }
      std::fflush(stdout);
      if (json_ != nullptr) {
        std::vector<std::string> errors;
        if (!error.empty()) errors.push_back(error);
        if (absl::Status s = json_->Finish(out_of_bounds, average, min_bw_, bandwidth_ok, errors);
            !s.ok()) {
          std::fprintf(stderr, "%s: %s\n", program_.c_str(), std::string(s.message()).c_str());
        }
      }
    } else if (!error.empty()) {
      std::fprintf(stderr, "# error: %s\n", error.c_str());
    }
    if (!status.ok()) return ExitCodeFor(status);
    // No rank leaves before rank 0 has reported: a launcher stops the others when one exits
    // non-zero, which would cut rank 0's footer short.
    if (absl::Status s = comm_->Barrier().Wait(); !s.ok()) {
      std::fprintf(stderr, "# error: final barrier: %s\n", Explain(s).c_str());
      return ExitCodeFor(s);
    }
    return reasons.empty() ? 0 : kExitResults;
  }

  // Errors after -T passed are the abort's doing: say so first.
  std::string Explain(const absl::Status& status) const {
    if (watchdog_.expired()) return absl::StrCat(watchdog_.Message(), ": ", status.message());
    return std::string(status.message());
  }

  int ExitCodeFor(const absl::Status& status) const {
    if (watchdog_.expired()) return Watchdog::kExitCode;
    return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitError;
  }

  const Collective& collective_;
  const Options& options_;
  const std::optional<double> min_bw_;
  const std::string program_;
  Watchdog watchdog_;
  std::unique_ptr<JsonReport> json_;
  std::unique_ptr<Communicator> comm_;
  std::vector<std::unique_ptr<Communicator>> variant_comms_;  // -V's children of comm_
};

}  // namespace

int RunPerfTool(int argc, char** argv, const Collective& collective) {
  setlinebuf(stdout);
  const std::string program = absl::StrCat(collective.name(), "_perf");
  absl::StatusOr<ParsedOptions> parsed = ParseOptions(argc, argv);
  absl::StatusOr<std::optional<double>> min_bw = MinimumBandwidth();
  for (const absl::Status& s : {parsed.status(), min_bw.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n%s", program.c_str(), std::string(s.message()).c_str(),
                   Usage(program).c_str());
      return kExitUsage;
    }
  }
  if (parsed->options.help) {
    std::printf("%s", Usage(program).c_str());
    return 0;
  }
  if (parsed->options.compression && !Compressible(collective)) {
    std::fprintf(stderr,
                 "%s: --compression is for all_reduce_perf and reduce_scatter_perf only (%s "
                 "has no compressed form)\n",
                 program.c_str(), program.c_str());
    return kExitUsage;
  }
  Tool tool(collective, parsed->options, *min_bw);
  return tool.Run(parsed->notes);
}

}  // namespace weft::perf
