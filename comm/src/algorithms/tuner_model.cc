#include "algorithms/tuner_model.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace weft {
namespace {

struct Default {
  const char* name;
  LinkCost cost;
};

// Medians of weft-tune's fits: links from the 2 x 2 rig, direct collectives from 2 ranks of the
// 2-core VM (cma_direct_shared scaled from shm_direct by their measured ratio on 3 ranks).
constexpr Default kDefaults[] = {
    {"shm", {7.0, 5.5}},
    {"net", {42.0, 1.1}},
    {"net_flow", {20.0, 1.55}},
    {"shm_direct.all_reduce", {0.8, 2.0}},
    {"shm_direct.reduce_scatter", {0.7, 3.2}},
    {"shm_direct.all_gather", {0.7, 4.0}},
    {"shm_direct.broadcast", {0.6, 3.0}},
    {"cma_direct.all_reduce", {9.0, 0.8}},
    {"cma_direct.reduce_scatter", {4.5, 1.9}},
    {"cma_direct.all_gather", {4.6, 2.2}},
    {"cma_direct.broadcast", {4.3, 1.6}},
    {"cma_direct_shared.all_reduce", {9.0, 2.6}},
    {"cma_direct_shared.reduce_scatter", {4.5, 4.7}},
    {"cma_direct_shared.all_gather", {4.6, 4.0}},
    {"cma_direct_shared.broadcast", {4.3, 2.6}},
};

bool IsLinkClass(absl::string_view name) {
  return name == "shm" || name == "net" || name == "net_flow";
}

// Every class a file may name: a default exists for each.
bool KnownClass(absl::string_view name) {
  for (const Default& d : kDefaults) {
    if (name == d.name) return true;
  }
  return false;
}

// "shm_direct.all_gather.2": a key as the text form writes it.
std::string Label(const std::pair<std::string, int>& key) {
  return key.second > 0 ? absl::StrCat(key.first, ".", key.second) : key.first;
}

}  // namespace

std::string CostModel::CollectiveClass(absl::string_view algorithm, absl::string_view collective) {
  return absl::StrCat(algorithm, ".", collective);
}

void CostModel::Set(absl::string_view name, int ranks, LinkCost cost) {
  classes_[{std::string(name), ranks}] = cost;
}

LinkCost CostModel::Get(absl::string_view name, int ranks, int* measured_ranks) const {
  int unused = 0;
  int& found = measured_ranks != nullptr ? *measured_ranks : unused;
  const std::string key(name);
  for (int r : {ranks, 0}) {
    if (auto it = classes_.find({key, r}); it != classes_.end()) {
      found = r == 0 ? ranks : r;
      return it->second;
    }
  }
  const LinkCost* nearest = nullptr;
  for (auto it = classes_.lower_bound({key, 1}); it != classes_.end() && it->first.first == key;
       ++it) {
    if (nearest == nullptr || std::abs(it->first.second - ranks) < std::abs(found - ranks)) {
      nearest = &it->second;
      found = it->first.second;
    }
  }
  if (nearest != nullptr) return *nearest;
  // A file that measured net but not net_flow: a flow alone is no slower than in company, and the
  // file's net describes this network better than the built-in default does.
  if (name == kNetFlow) {
    const auto measured_net = classes_.lower_bound({"net", 0});
    if (measured_net != classes_.end() && measured_net->first.first == "net") {
      return Get("net", ranks, measured_ranks);
    }
  }
  for (const Default& d : kDefaults) {
    if (name == d.name) {
      found = IsLinkClass(name) ? ranks : kDefaultRanks;
      return d.cost;
    }
  }
  found = ranks;
  return kDefaults[0].cost;
}

absl::Status CostModel::Merge(absl::string_view text, absl::string_view origin) {
  int line_number = 0;
  std::map<std::pair<std::string, int>, LinkCost> merged = classes_;
  double reduce_gbps = reduce_gbps_;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ":", line_number, ": '", line, "': ", why,
          " (expected 'KEY VALUE' with VALUE > 0 and KEY reduce.gbps or CLASS[.RANKS].alpha_us "
          "or CLASS[.RANKS].gbps, CLASS shm, net, net_flow or ALGORITHM.COLLECTIVE with "
          "ALGORITHM shm_direct, cma_direct or cma_direct_shared and COLLECTIVE all_reduce, "
          "reduce_scatter, all_gather or broadcast)"));
    };
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.size() != 2) return bad("not two words");
    double value = 0;
    if (!absl::SimpleAtod(words[1], &value) || !std::isfinite(value) || value <= 0) {
      return bad("the value is not a positive number");
    }
    if (words[0] == "reduce.gbps") {
      reduce_gbps = value;
      continue;
    }
    std::vector<absl::string_view> parts = absl::StrSplit(words[0], '.');
    const absl::string_view field = parts.back();
    parts.pop_back();
    int ranks = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts.back(), &ranks)) {
      if (ranks < 1) return bad("RANKS is not a positive number");
      parts.pop_back();
    }
    const std::string name = absl::StrJoin(parts, ".");
    if (!KnownClass(name)) return bad("unknown class");
    LinkCost& cost = merged[{name, ranks}];
    if (field == "alpha_us") {
      cost.alpha_us = value;
    } else if (field == "gbps") {
      cost.gbps = value;
    } else {
      return bad("unknown field");
    }
  }
  for (const auto& [key, cost] : merged) {
    if (cost.alpha_us <= 0 || cost.gbps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": ", Label(key), " needs both alpha_us and gbps"));
    }
  }
  classes_ = std::move(merged);
  reduce_gbps_ = reduce_gbps;
  source_ = std::string(origin);
  return absl::OkStatus();
}

std::string CostModel::Format() const {
  std::string text = "# weft tuning (weft-tune): alpha in microseconds, bandwidth in 1e9 bytes/s\n";
  absl::StrAppend(&text, "reduce.gbps ", reduce_gbps_, "\n");
  for (const auto& [key, cost] : classes_) {
    absl::StrAppend(&text, Label(key), ".alpha_us ", cost.alpha_us, "\n", Label(key), ".gbps ",
                    cost.gbps, "\n");
  }
  return text;
}

}  // namespace weft
