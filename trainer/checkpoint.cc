#include "checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "weft/shard/durable_file.h"

namespace weft::trainer {
namespace {

// The numbers N of the files (or directories) <prefix>N<suffix> in `dir`, newest (highest) first.
std::vector<int64_t> ListNumbered(const std::string& dir, std::string_view prefix,
                                  std::string_view suffix) {
  std::vector<int64_t> numbers;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t n;
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) &&
        name.ends_with(suffix) &&
        absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                         &n)) {
      numbers.push_back(n);
    }
  }
  std::sort(numbers.rbegin(), numbers.rend());
  return numbers;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// At most kShown items of `items`, then how many more there are: a changed width touches every
// tensor, and the first few differences say enough.
std::string Listed(const std::vector<std::string>& items, absl::string_view separator) {
  constexpr size_t kShown = 6;
  if (items.size() <= kShown) return absl::StrJoin(items, separator);
  return absl::StrCat(absl::StrJoin(items.begin(), items.begin() + kShown, separator), separator,
                      "and ", items.size() - kShown, " more");
}

// An integer member of the metadata.
bool GetInt(const JsonValue& object, const char* key, int64_t* out) {
  const JsonValue* v = object.Find(key);
  if (v == nullptr || v->type != JsonValue::Type::kNumber || !v->is_integer) return false;
  *out = v->integer;
  return true;
}

}  // namespace

std::string MetaJson(const CheckpointMeta& meta) {
  return absl::StrFormat(
      "{\"step\": %d, \"data_cursor\": %d, \"sample_rng\": \"%016x\", \"optimizer_step\": %d, "
      "\"world\": {\"ranks\": %d, \"tp\": %d, \"pp\": %d, \"zero\": %d, \"shard_group\": "
      "%d}, \"loss_scaler\": {\"scale\": %.17g, \"clean_steps\": %d, \"skipped\": %d}, "
      "\"config\": %s}",
      meta.step, meta.data_cursor, meta.sample_rng, meta.optimizer_step, meta.ranks, meta.tp,
      meta.pp, meta.zero, meta.shard_group, meta.loss_scale, meta.loss_scale_clean_steps,
      meta.loss_scale_skipped, meta.config_json);
}

absl::StatusOr<CheckpointMeta> ParseMeta(const JsonValue& metadata) {
  CheckpointMeta meta;
  int64_t cursor = 0;
  const JsonValue* rng = metadata.Find("sample_rng");
  const JsonValue* config = metadata.Find("config");
  const JsonValue* world = metadata.Find("world");
  int64_t ranks = 0, tp = 0, pp = 0, zero = 0, shard_group = 0;
  if (!GetInt(metadata, "step", &meta.step) || !GetInt(metadata, "data_cursor", &cursor) ||
      !GetInt(metadata, "optimizer_step", &meta.optimizer_step) || rng == nullptr ||
      rng->type != JsonValue::Type::kString || !absl::SimpleHexAtoi(rng->text, &meta.sample_rng) ||
      config == nullptr || config->type != JsonValue::Type::kObject || world == nullptr ||
      !GetInt(*world, "ranks", &ranks) || !GetInt(*world, "tp", &tp) ||
      !GetInt(*world, "pp", &pp) || !GetInt(*world, "zero", &zero) ||
      !GetInt(*world, "shard_group", &shard_group)) {
    return absl::DataLossError(
        "checkpoint metadata lacks step, data_cursor, sample_rng, optimizer_step, world or config");
  }
  meta.data_cursor = static_cast<uint64_t>(cursor);
  meta.config_json = JsonText(*config);
  meta.ranks = static_cast<int>(ranks);
  meta.tp = static_cast<int>(tp);
  meta.pp = static_cast<int>(pp);
  meta.zero = static_cast<int>(zero);
  meta.shard_group = static_cast<int>(shard_group);
  // Absent from checkpoints of runs that never scaled their loss.
  if (const JsonValue* scaler = metadata.Find("loss_scaler"); scaler != nullptr) {
    const JsonValue* scale = scaler->Find("scale");
    if (scale == nullptr || scale->type != JsonValue::Type::kNumber ||
        !absl::SimpleAtod(scale->text, &meta.loss_scale) ||
        !GetInt(*scaler, "clean_steps", &meta.loss_scale_clean_steps) ||
        !GetInt(*scaler, "skipped", &meta.loss_scale_skipped)) {
      return absl::DataLossError(
          "checkpoint metadata: loss_scaler lacks scale, clean_steps or skipped");
    }
  }
  return meta;
}

std::vector<shard::TensorInfo> TensorTable(const ParamLayout& layout) {
  std::vector<shard::TensorInfo> table;
  for (const TensorView& t : layout.tensors()) {
    table.push_back(
        {t.name, std::vector<int64_t>(t.global_shape.begin(), t.global_shape.end()), "f32"});
  }
  return table;
}

absl::Status CheckLayout(const std::vector<shard::TensorInfo>& saved, const ParamLayout& layout) {
  std::vector<std::string> missing, extra, differs;
  for (const shard::TensorInfo& m : TensorTable(layout)) {
    const auto s = std::find_if(saved.begin(), saved.end(),
                                [&](const shard::TensorInfo& r) { return r.name == m.name; });
    if (s == saved.end()) {
      missing.push_back(m.name);
    } else if (s->shape != m.shape) {
      differs.push_back(absl::StrCat(m.name, ": checkpoint ", ShapeText(s->shape), ", model ",
                                     ShapeText(m.shape)));
    } else if (s->dtype != m.dtype) {
      differs.push_back(absl::StrCat(m.name, ": checkpoint ", s->dtype, ", model ", m.dtype));
    }
  }
  for (const shard::TensorInfo& s : saved) {
    if (layout.Find(s.name) < 0) extra.push_back(s.name);
  }
  std::vector<std::string> problems;
  if (!missing.empty()) {
    problems.push_back(absl::StrCat("not in the checkpoint: ", Listed(missing, ", ")));
  }
  if (!extra.empty()) problems.push_back(absl::StrCat("not in the model: ", Listed(extra, ", ")));
  if (!differs.empty()) problems.push_back(Listed(differs, "; "));
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(problems, "; "));
}

std::string RunDir(const std::string& out_dir, int run) {
  return absl::StrFormat("%s/checkpoints/run-%03d", out_dir, run);
}

absl::StatusOr<int> OpenRun(const std::string& out_dir, bool resume) {
  const std::string root = out_dir + "/checkpoints";
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory ", root, ": ", ec.message()));
  }
  const std::vector<int64_t> runs = ListNumbered(root, "run-", "");
  if (resume && !runs.empty()) {
    const int run = static_cast<int>(runs.front());
    // Leftovers of a save that crashed before its rename; never read, so safe to drop.
    std::vector<std::filesystem::path> stale;
    for (const auto& entry : std::filesystem::directory_iterator(RunDir(out_dir, run), ec)) {
      if (entry.path().filename().string().ends_with(".tmp")) stale.push_back(entry.path());
    }
    for (const auto& path : stale) std::filesystem::remove_all(path, ec);
    return run;
  }
  // A fresh run claims the next free number; mkdir fails if a concurrent job took it first.
  for (int run = runs.empty() ? 1 : static_cast<int>(runs.front()) + 1;; ++run) {
    const std::string dir = RunDir(out_dir, run);
    if (::mkdir(dir.c_str(), 0755) == 0) return run;
    if (errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create checkpoint run directory ", dir, ": ", std::strerror(errno)));
    }
  }
}

std::string CheckpointPath(const std::string& run_dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%08d", run_dir, step);
}

std::vector<int64_t> CheckpointSteps(const std::string& run_dir) {
  return ListNumbered(run_dir, "ckpt-", "");
}

absl::Status CommitLatest(const std::string& run_dir, int64_t step, int keep) {
  const std::string name = std::filesystem::path(CheckpointPath(run_dir, step)).filename().string();
  if (absl::Status s = shard::WriteFileAtomically(run_dir + "/latest", name + "\n"); !s.ok()) {
    return s;
  }
  const std::vector<int64_t> steps = CheckpointSteps(run_dir);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i) {
    std::filesystem::remove_all(CheckpointPath(run_dir, steps[i]), ec);
  }
  return absl::OkStatus();
}

}  // namespace weft::trainer
