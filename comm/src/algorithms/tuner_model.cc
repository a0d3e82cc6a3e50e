#include "algorithms/tuner_model.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weft {
namespace {

// Before calibration: a ring step over shared memory and over a 10 Gbit/s network.
constexpr LinkCost kDefaultShm{1.0, 4.0};
constexpr LinkCost kDefaultNet{30.0, 1.0};

bool IsDirect(absl::string_view name) { return name != "shm" && name != "net"; }

bool KnownDirectClass(absl::string_view algorithm, absl::string_view collective) {
  return (algorithm == "shm_direct" || algorithm == "cma_direct") &&
         (collective == "all_reduce" || collective == "reduce_scatter" ||
          collective == "all_gather" || collective == "broadcast");
}

}  // namespace

double LinkCost::Time(double bytes) const {
  const double cached = static_cast<double>(CostModel::kCachedBytes);
  if (cached_gbps <= 0) return alpha() + bytes * beta();
  const double cached_beta = 1.0 / (cached_gbps * 1e9);
  if (bytes <= cached) return alpha() + bytes * cached_beta;
  return alpha() + cached * cached_beta + (bytes - cached) * beta();
}

std::string CostModel::DirectClass(absl::string_view algorithm, absl::string_view collective) {
  return absl::StrCat(algorithm, ".", collective);
}

bool CostModel::Has(absl::string_view name, int ranks) const {
  auto it = classes_.find({std::string(name), ranks});
  return it != classes_.end() && it->second.gbps > 0 && it->second.alpha_us > 0;
}

void CostModel::Set(absl::string_view name, int ranks, LinkCost cost) {
  classes_[{std::string(name), ranks}] = cost;
}

void CostModel::set_reduce_gbps(double gbps) {
  reduce_gbps_ = gbps;
  has_reduce_ = true;
}

LinkCost CostModel::Get(absl::string_view name, int ranks) const {
  const std::string key(name);
  if (Has(key, ranks)) return classes_.at({key, ranks});
  if (Has(key, 0)) return classes_.at({key, 0});
  int nearest = 0;
  LinkCost cost;
  for (auto it = classes_.lower_bound({key, 1}); it != classes_.end() && it->first.first == key;
       ++it) {
    const int r = it->first.second;
    if (nearest == 0 || std::abs(r - ranks) < std::abs(nearest - ranks)) {
      nearest = r;
      cost = it->second;
    }
  }
  if (nearest > 0) {
    if (IsDirect(name)) {
      cost.gbps *= static_cast<double>(nearest) / ranks;
      cost.cached_gbps *= static_cast<double>(nearest) / ranks;
    }
    return cost;
  }
  if (name == "net") return kDefaultNet;
  if (name == "shm") return kDefaultShm;
  const LinkCost shm = Get("shm", ranks);
  return LinkCost{shm.alpha_us * 2, shm.gbps / 3};
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
          " (expected 'KEY VALUE': KEY is reduce.gbps or CLASS[.RANKS].FIELD, CLASS one of shm, "
          "net, shm_direct.COLLECTIVE, cma_direct.COLLECTIVE (all_reduce, reduce_scatter, "
          "all_gather, broadcast), FIELD one of alpha_us, gbps, cached_gbps; VALUE > 0)"));
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
    std::string name;
    if (parts.size() >= 3 && KnownDirectClass(parts[0], parts[1])) {
      name = DirectClass(parts[0], parts[1]);
      parts.erase(parts.begin());
    } else if (parts[0] == "shm" || parts[0] == "net") {
      name = std::string(parts[0]);
    } else {
      return bad("unknown key");
    }
    int ranks = 0;
    if (parts.size() < 2 || parts.size() > 3) return bad("unknown key");
    if (parts.size() == 3 && (!absl::SimpleAtoi(parts[1], &ranks) || ranks < 1)) {
      return bad("RANKS is not a positive number");
    }
    LinkCost& cost = classes_[{name, ranks}];
    if (parts.back() == "alpha_us") {
      cost.alpha_us = value;
    } else if (parts.back() == "gbps") {
      cost.gbps = value;
    } else if (parts.back() == "cached_gbps" && IsDirect(name)) {
      cost.cached_gbps = value;
    } else {
      return bad("unknown field");
    }
  }
  for (const auto& [key, cost] : classes_) {
    if (cost.alpha_us <= 0 || cost.gbps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", key.first, key.second > 0 ? absl::StrCat(".", key.second) : "",
                       " needs both alpha_us and gbps"));
    }
  }
  source_ = std::string(origin);
  return absl::OkStatus();
}

std::string CostModel::Format() const {
  std::string text = "# weft tuning: alpha in microseconds, bandwidth in 1e9 bytes/s\n";
  if (has_reduce_) absl::StrAppend(&text, "reduce.gbps ", reduce_gbps_, "\n");
  for (const auto& [key, cost] : classes_) {
    const std::string name = key.second > 0 ? absl::StrCat(key.first, ".", key.second) : key.first;
    absl::StrAppend(&text, name, ".alpha_us ", cost.alpha_us, "\n", name, ".gbps ", cost.gbps,
                    "\n");
    if (cost.cached_gbps > 0) absl::StrAppend(&text, name, ".cached_gbps ", cost.cached_gbps, "\n");
  }
  return text;
}

}  // namespace weft
