#include "algorithms/tuner_model.h"

#include <cmath>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "algorithms/algorithm.h"

namespace weft {
namespace {

// Before calibration: a ring step over shared memory and over a 10 Gbit/s network.
constexpr LinkCost kDefaultShm{1.0, 4.0};
constexpr LinkCost kDefaultNet{30.0, 1.0};

constexpr absl::string_view kPointField = "us_at_";

bool IsDirectAlgorithm(absl::string_view algorithm) {
  return algorithm == "shm_direct" || algorithm == "cma_direct" ||
         algorithm == CostModel::kCmaDirectShared;
}

// Whether `algorithm`'s `collective` has a curve (a direct algorithm) or anchors (one over links)
// in the model: calibration times the all-reduce, reduce-scatter, all-gather and broadcast of
// every algorithm that implements them (registry.cc).
bool IsCollectiveClass(absl::string_view algorithm, absl::string_view collective) {
  const std::optional<AlgorithmId> id = algorithm == CostModel::kCmaDirectShared
                                            ? AlgorithmId::kCmaDirect
                                            : ParseAlgorithm(algorithm);
  if (!id || (algorithm != Name(*id) && algorithm != CostModel::kCmaDirectShared)) return false;
  for (OpKind kind :
       {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast}) {
    if (collective == Name(kind)) return Implements(*id, kind);
  }
  return false;
}

// A direct algorithm's curve needs two points to have a slope; an anchor is one.
size_t PointsNeeded(absl::string_view collective_class) {
  return IsDirectAlgorithm(collective_class.substr(0, collective_class.find('.'))) ? 2 : 1;
}

// The entry of `table` for (`name`, `ranks`): that size, else the size-less one, else the
// nearest size (its size in *found); nullptr when there is none. `usable` tells entries apart
// from ones a file left incomplete.
template <typename Entry, typename Usable>
const Entry* Lookup(const std::map<std::pair<std::string, int>, Entry>& table,
                    absl::string_view name, int ranks, Usable usable, int* found) {
  const std::string key(name);
  for (int r : {ranks, 0}) {
    auto it = table.find({key, r});
    if (it != table.end() && usable(it->second)) {
      *found = r == 0 ? ranks : r;
      return &it->second;
    }
  }
  const Entry* nearest = nullptr;
  for (auto it = table.lower_bound({key, 1}); it != table.end() && it->first.first == key; ++it) {
    const int r = it->first.second;
    if (usable(it->second) &&
        (nearest == nullptr || std::abs(r - ranks) < std::abs(*found - ranks))) {
      nearest = &it->second;
      *found = r;
    }
  }
  return nearest;
}

// "shm_direct.all_gather.2": a table key as the text form writes it.
std::string Label(const std::pair<std::string, int>& key) {
  return key.second > 0 ? absl::StrCat(key.first, ".", key.second) : key.first;
}

bool UsableLink(const LinkCost& cost) { return cost.gbps > 0 && cost.alpha_us > 0; }
bool UsableCurve(const TimeCurve& curve) { return curve.usable(); }
bool Complete(const std::pair<std::string, int>& key, const TimeCurve& curve) {
  return curve.points().size() >= PointsNeeded(key.first);
}

}  // namespace

double TimeCurve::Seconds(double bytes) const {
  auto upper = points_.lower_bound(static_cast<size_t>(std::max(bytes, 0.0)));
  if (upper == points_.begin()) return upper->second * 1e-6;
  // Beyond the last point, on along the line from the first through the last: the last point's
  // own rate over the fixed cost. The last segment's slope would carry its lower end's caches
  // with it: calibration's last two points, 8 MiB and 32 MiB, lie either side of the last-level
  // cache, and an algorithm that gains more from the cache at 8 MiB got the steeper line.
  // shm_direct's and cma_direct's all-reduces, timed alike at 32 MiB, were priced 90 and 89 ms
  // at 256 MiB, where they took 66-68 and 95-110.
  const auto lower = upper == points_.end() ? points_.begin() : std::prev(upper);
  if (upper == points_.end()) --upper;
  const double x0 = static_cast<double>(lower->first), x1 = static_cast<double>(upper->first);
  const double slope = (upper->second - lower->second) / (x1 - x0);
  return std::max(lower->second + (bytes - x0) * slope, points_.begin()->second) * 1e-6;
}

std::string CostModel::CollectiveClass(absl::string_view algorithm, absl::string_view collective) {
  return absl::StrCat(algorithm, ".", collective);
}

bool CostModel::Has(absl::string_view name, int ranks) const {
  const std::pair<std::string, int> key{std::string(name), ranks};
  if (auto it = classes_.find(key); it != classes_.end()) return UsableLink(it->second);
  if (auto it = curves_.find(key); it != curves_.end()) return Complete(key, it->second);
  return false;
}

const TimeCurve* CostModel::Anchors(absl::string_view name, int ranks) const {
  for (int r : {ranks, 0}) {
    auto it = curves_.find({std::string(name), r});
    if (it != curves_.end() && !it->second.points().empty()) return &it->second;
  }
  return nullptr;
}

void CostModel::Set(absl::string_view name, int ranks, LinkCost cost) {
  classes_[{std::string(name), ranks}] = cost;
}

void CostModel::SetCurve(absl::string_view name, int ranks, TimeCurve curve) {
  curves_[{std::string(name), ranks}] = std::move(curve);
}

void CostModel::set_reduce_gbps(double gbps) {
  reduce_gbps_ = gbps;
  has_reduce_ = true;
}

LinkCost CostModel::Get(absl::string_view name, int ranks) const {
  int found = 0;
  if (const LinkCost* cost = Lookup(classes_, name, ranks, UsableLink, &found)) return *cost;
  if (name == kNetFlow) return Get("net", ranks);
  return name == "net" ? kDefaultNet : kDefaultShm;
}

double CostModel::DirectSeconds(absl::string_view name, int ranks, double bytes) const {
  int found = 0;
  if (const TimeCurve* curve = Lookup(curves_, name, ranks, UsableCurve, &found)) {
    const double t = curve->Seconds(bytes);
    if (found == ranks) return t;
    const double fixed = curve->Seconds(0);
    return fixed + (t - fixed) * ranks / found;
  }
  const LinkCost shm = Get("shm", ranks);
  return 2 * shm.alpha() + 3 * bytes * shm.beta();
}

absl::Status CostModel::Merge(absl::string_view text, absl::string_view origin) {
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ":", line_number, ": '", line, "': ", why,
          " (expected 'KEY VALUE': KEY is reduce.gbps, or LINK[.RANKS].alpha_us or "
          "LINK[.RANKS].gbps with LINK shm, net or net_flow, or "
          "ALGORITHM.COLLECTIVE[.RANKS].us_at_BYTES with ALGORITHM shm_direct, cma_direct, "
          "cma_direct_shared or hierarchical and COLLECTIVE all_reduce, reduce_scatter, "
          "all_gather or broadcast, or ALGORITHM ring or rabenseifner and COLLECTIVE "
          "all_reduce, reduce_scatter or all_gather, or recursive_doubling.all_reduce, or "
          "tree.broadcast; "
          "VALUE > 0)"));
    };
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    double value = 0;
    if (words.size() != 2) return bad("not two words");
    if (!absl::SimpleAtod(words[1], &value) || !std::isfinite(value) || value <= 0) {
      return bad("the value is not a positive number");
    }
    if (words[0] == "reduce.gbps") {
      set_reduce_gbps(value);
      continue;
    }
    std::vector<absl::string_view> parts = absl::StrSplit(words[0], '.');
    const bool curve = parts.size() >= 3 && IsCollectiveClass(parts[0], parts[1]);
    if (!curve && parts[0] != "shm" && parts[0] != "net" && parts[0] != kNetFlow) {
      return bad("unknown key");
    }
    const std::string name = curve ? CollectiveClass(parts[0], parts[1]) : std::string(parts[0]);
    if (curve) parts.erase(parts.begin());
    int ranks = 0;
    if (parts.size() < 2 || parts.size() > 3) return bad("unknown key");
    if (parts.size() == 3 && (!absl::SimpleAtoi(parts[1], &ranks) || ranks < 1)) {
      return bad("RANKS is not a positive number");
    }
    const absl::string_view field = parts.back();
    if (curve) {
      size_t bytes = 0;
      if (!absl::StartsWith(field, kPointField) ||
          !absl::SimpleAtoi(field.substr(kPointField.size()), &bytes)) {
        return bad("unknown field");
      }
      curves_[{name, ranks}].Set(bytes, value);
      continue;
    }
    LinkCost& cost = classes_[{name, ranks}];
    if (field == "alpha_us") {
      cost.alpha_us = value;
    } else if (field == "gbps") {
      cost.gbps = value;
    } else {
      return bad("unknown field");
    }
  }
  for (const auto& [key, cost] : classes_) {
    if (!UsableLink(cost)) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", Label(key), " needs both alpha_us and gbps"));
    }
  }
  for (const auto& [key, curve] : curves_) {
    if (!Complete(key, curve)) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", Label(key), " needs two us_at_BYTES points at least"));
    }
  }
  source_ = std::string(origin);
  return absl::OkStatus();
}

std::string CostModel::Format() const {
  std::string text =
      "# weft tuning: alpha in microseconds, bandwidth in 1e9 bytes/s, us_at_BYTES: the "
      "microseconds of one collective of BYTES\n";
  if (has_reduce_) absl::StrAppend(&text, "reduce.gbps ", reduce_gbps_, "\n");
  for (const auto& [key, cost] : classes_) {
    absl::StrAppend(&text, Label(key), ".alpha_us ", cost.alpha_us, "\n", Label(key), ".gbps ",
                    cost.gbps, "\n");
  }
  for (const auto& [key, curve] : curves_) {
    for (const auto& [bytes, us] : curve.points()) {
      absl::StrAppend(&text, Label(key), ".", kPointField, bytes, " ", us, "\n");
    }
  }
  return text;
}

}  // namespace weft
