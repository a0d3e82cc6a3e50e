#include "perf/json_report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "weft/comm/json.h"

namespace weft::perf {
namespace {

std::string Number(double value) {
  if (!std::isfinite(value)) return "null";
  return absl::StrFormat("%.10g", value);
}

std::string Number(std::optional<double> value) { return value ? Number(*value) : "null"; }

std::string Bool(bool value) { return value ? "true" : "false"; }

std::string Now() {
  const std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

void AppendMember(std::string* list, const std::string& member) {
  if (!list->empty()) *list += ",\n    ";
  *list += member;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JsonReport>> JsonReport::Create(const std::string& path) {
  std::string candidate = path;
  for (int attempt = 0; attempt <= 1000; ++attempt) {
    std::FILE* file = std::fopen(candidate.c_str(), "wx");
    if (file != nullptr) return std::unique_ptr<JsonReport>(new JsonReport(file, candidate));
    if (errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("creating ", candidate, ": ", std::strerror(errno)));
    }
    candidate = absl::StrCat(path, ".", attempt);
  }
  return absl::AlreadyExistsError(
      absl::StrCat(path, " and ", path, ".0 to .999 all exist: remove some"));
}

JsonReport::JsonReport(std::FILE* file, std::string path)
    : file_(file), path_(std::move(path)), start_time_(Now()) {}

JsonReport::~JsonReport() {
  if (file_ != nullptr) std::fclose(file_);
}

void JsonReport::SetRun(const Options& o, const std::string& program, int ranks) {
  std::vector<std::string> args;
  for (const std::string& arg : o.args) args.push_back(JsonQuote(arg));
  std::vector<std::string> variants;
  for (const std::string& variant : o.variants) variants.push_back(JsonQuote(variant));
  const std::string step = o.step_factor > 1 ? absl::StrCat("\"step_factor\": ", o.step_factor)
                                             : absl::StrCat("\"step_bytes\": ", o.step_bytes);
  run_ = absl::StrCat(
      "  \"program\": ", JsonQuote(program),
      ",\n  \"weft_version\": ", JsonQuote(WEFT_VERSION_STRING),
      ",\n  \"start_time\": ", JsonQuote(start_time_), ",\n  \"args\": [",
      absl::StrJoin(args, ", "), "],\n  \"config\": {\"ranks\": ", ranks,
      ", \"minimum_bytes\": ", o.min_bytes, ", \"maximum_bytes\": ", o.max_bytes, ", ", step,
      ", \"warmup_iters\": ", o.warmup_iters, ", \"iterations\": ", o.iters,
      ", \"aggregated_iterations\": ", o.agg_iters, ", \"run_cycles\": ", o.run_cycles,
      ", \"validation\": ", o.check, ", \"blocking\": ", o.blocking, ", \"average\": ", o.average,
      ", \"report_cputime\": ", Bool(o.report_cputime), ", \"unalign\": ", o.unalign,
      ", \"timeout_s\": ", o.timeout_s, ", \"algorithm\": ", JsonQuote(o.algorithm),
      ", \"variants\": [", absl::StrJoin(variants, ", "), "]",
      ", \"inject_errors\": ", o.inject_errors, ", \"predicted\": ", Bool(o.predicted),
      o.compression ? absl::StrCat(", \"compression\": ", JsonQuote(Name(o.compression->codec)),
                                   ", \"compression_block\": ", o.compression->block,
                                   ", \"topk_ratio\": ", Number(o.compression->topk_ratio))
                    : "",
      "}");
}

void JsonReport::SetDevices(const std::vector<RankInfo>& devices) {
  devices_.clear();
  for (const RankInfo& d : devices) {
    AppendMember(&devices_, absl::StrCat("{\"rank\": ", d.rank, ", \"group\": 0, \"pid\": ", d.pid,
                                         ", \"hostname\": ", JsonQuote(d.hostname),
                                         ", \"device\": ", d.local_rank,
                                         ", \"device_info\": ", JsonQuote(d.device), "}"));
  }
}

void JsonReport::Add(const Measurement& m) {
  std::string prediction;
  if (m.prediction.has_value()) {
    const Prediction& p = *m.prediction;
    prediction = absl::StrCat(", \"algorithm\": ", JsonQuote(p.algorithm),
                              ", \"predicted_us\": ", Number(p.predicted_us),
                              ", \"measured_over_predicted\": ", Number(p.measured_over_predicted));
  }
  std::string wire;
  if (m.wire.has_value()) {
    const double ratio = m.wire->uncompressed_bytes == 0
                             ? NAN
                             : static_cast<double>(m.wire->bytes) / m.wire->uncompressed_bytes;
    wire = absl::StrCat(", \"wire_bytes\": ", m.wire->bytes,
                        ", \"uncompressed_bytes\": ", m.wire->uncompressed_bytes,
                        ", \"wire_ratio\": ", Number(ratio));
  }
  AppendMember(
      &results_,
      absl::StrCat("{\"cycle\": ", m.cycle, ", \"size\": ", m.bytes, ", \"count\": ", m.count,
                   ", \"type\": ", JsonQuote(m.type), ", \"redop\": ", JsonQuote(m.redop),
                   ", \"root\": ", m.root,
                   ", \"placement\": ", JsonQuote(m.in_place ? "in-place" : "out-of-place"),
                   ", \"time_us\": ", Number(m.time_us), ", \"algbw\": ", Number(m.algbw),
                   ", \"busbw\": ", Number(m.busbw), ", \"wrong\": ",
                   m.wrong.has_value() ? absl::StrCat(*m.wrong) : "null", prediction,
                   m.variant.empty() ? "" : absl::StrCat(", \"variant\": ", JsonQuote(m.variant)),
                   wire, "}"));
}

absl::Status JsonReport::Finish(int out_of_bounds, double average_busbw,
                                std::optional<double> min_bw, bool bandwidth_ok,
                                const std::vector<std::string>& errors) {
  std::vector<std::string> quoted;
  for (const std::string& e : errors) quoted.push_back(JsonQuote(e));
  const std::string document = absl::StrCat(
      "{\n  \"version\": 1,\n", run_, ",\n  \"devices\": [\n    ", devices_,
      "\n  ],\n  \"results\": [\n    ", results_,
      "\n  ],\n  \"out_of_bounds\": {\"count\": ", out_of_bounds,
      ", \"okay\": ", Bool(out_of_bounds == 0),
      "},\n  \"average_bus_bandwidth\": {\"bandwidth\": ", Number(average_busbw),
      ", \"minimum\": ", Number(min_bw), ", \"okay\": ", Bool(bandwidth_ok), "},\n  \"errors\": [",
      absl::StrJoin(quoted, ", "), "],\n  \"end_time\": ", JsonQuote(Now()), "\n}\n");
  const bool written = std::fwrite(document.data(), 1, document.size(), file_) == document.size();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!written || !closed) {
    return absl::DataLossError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace weft::perf
