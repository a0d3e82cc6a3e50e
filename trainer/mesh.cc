#include "mesh.h"

#include <unistd.h>

#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::trainer {
namespace {

constexpr absl::Duration kCommTimeout = absl::Seconds(120);
constexpr size_t kHostBytes = 64;

// "{0,1} {2,3}": the world's ranks by the group `group_of` puts each in.
std::string Groups(int world, const std::function<int(int)>& group_of) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world; ++r) {
    const int g = group_of(r);
    if (g >= static_cast<int>(groups.size())) groups.resize(g + 1);
    groups[g].push_back(r);
  }
  std::vector<std::string> parts;
  for (const std::vector<int>& g : groups)
    parts.push_back(absl::StrCat("{", absl::StrJoin(g, ","), "}"));
  return absl::StrJoin(parts, " ");
}

}  // namespace

absl::StatusOr<Mesh> Mesh::Create(const Config& config, Communicator* world) {
  Mesh mesh;
  const int size = world == nullptr ? 1 : world->size();
  mesh.rank_ = world == nullptr ? 0 : world->rank();
  mesh.tp_ = config.tp;
  mesh.pp_ = config.pp;
  mesh.dp_ = config.data_parallel(size);
  char host[kHostBytes] = {};
  gethostname(host, kHostBytes - 1);
  std::vector<char> hosts(kHostBytes * size);
  std::memcpy(hosts.data(), host, kHostBytes);
  if (world != nullptr) {
    absl::Status s =
        world->AllGather(host, hosts.data(), kHostBytes, DataType::kInt8).Wait(kCommTimeout);
    if (!s.ok()) return s;
  }
  for (int r = 0; r < size; ++r) mesh.hosts_.emplace_back(hosts.data() + r * kHostBytes);
  if (mesh.tp_ > 1) {
    // One group per (dp, pp) index, ordered by tp index.
    absl::StatusOr<std::unique_ptr<Communicator>> tp =
        world->Split(mesh.rank_ / mesh.tp_, mesh.rank_);
    if (!tp.ok()) return tp.status();
    mesh.tp_comm_ = *std::move(tp);
  }
  if (mesh.dp_ > 1 && mesh.dp_ == size) {
    mesh.dp_comm_ = world;
  } else if (mesh.dp_ > 1) {
    // One group per (tp, pp) index, ordered by dp index.
    const int color = mesh.tp_rank() + mesh.tp_ * mesh.pp_rank();
    absl::StatusOr<std::unique_ptr<Communicator>> dp = world->Split(color, mesh.rank_);
    if (!dp.ok()) return dp.status();
    mesh.dp_split_ = *std::move(dp);
    mesh.dp_comm_ = mesh.dp_split_.get();
  }
  if (mesh.pp_ > 1) {
    // One group per (tp, dp) index, ordered by pp index.
    absl::StatusOr<std::unique_ptr<Communicator>> pp =
        world->Split(mesh.rank_ % (mesh.tp_ * mesh.dp_), mesh.rank_);
    if (!pp.ok()) return pp.status();
    mesh.pp_comm_ = *std::move(pp);
  }
  return mesh;
}

std::string Mesh::Describe() const {
  const int world = tp_ * dp_ * pp_;
  const auto tp_of = [&](int r) { return r / tp_; };
  const auto dp_of = [&](int r) { return r % tp_ + tp_ * (r / (tp_ * dp_)); };
  const auto pp_of = [&](int r) { return r % (tp_ * dp_); };
  std::vector<std::string> hosts;
  for (int r = 0; r < world; ++r) hosts.push_back(absl::StrCat(r, ":", hosts_[r]));
  return absl::StrCat(
      "mesh: ", world, " rank", world == 1 ? "" : "s", " = dp ", dp_, " × tp ", tp_, " × pp ", pp_,
      "\n  tp groups: ", Groups(world, tp_of), "\n  dp groups: ", Groups(world, dp_of),
      "\n  pp groups: ", Groups(world, pp_of), "\n  hosts: ", absl::StrJoin(hosts, " "));
}

}  // namespace weft::trainer
