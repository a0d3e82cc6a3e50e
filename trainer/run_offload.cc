#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "run.h"
#include "weft/comm/byte_size.h"

namespace weft::trainer {
namespace {

constexpr double kMiB = 1 << 20;

// This process's resident set in bytes (Linux's /proc/self/statm), 0 where unreadable.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace

absl::Status Run::SetUpOffload() {
  offload_metrics_ = config_.offload != "none" || !config_.memory_budget.empty();
  bool moments_out = config_.offload != "none";
  bool params_out = config_.offload == "optimizer+params";
  const size_t moments = dp_->moment_bytes(), params = dp_->param_slice_bytes();
  std::string plan;
  if (!config_.memory_budget.empty()) {
    // What this rank keeps before any offload: state, activations, mixed precision's working
    // copies. The moments go first, then (ZeRO-3) the parameter slices.
    const size_t budget = *ParseByteSize(config_.memory_budget);
    const size_t need = dp_->state_bytes() + static_cast<size_t>(predicted_activation_bytes_) +
                        model_->working_param_bytes();
    size_t left = need;
    moments_out = moments_out || left > budget;
    if (moments_out) left -= moments;
    params_out = params_out || (left > budget && params > 0);
    if (params_out) left -= params;
    plan = absl::StrFormat(
        "memory budget %.2f MiB per rank: state, activations and working "
        "copies need %.2f MiB; %s",
        budget / kMiB, need / kMiB,
        !moments_out ? std::string("nothing needs to move")
        : params_out ? absl::StrFormat("AdamW's moments (%.2f MiB) and the parameter "
                                       "slices (%.2f MiB) go to disk",
                                       moments / kMiB, params / kMiB)
                     : absl::StrFormat("AdamW's moments (%.2f MiB) go to disk", moments / kMiB));
    if (left > budget) {
      absl::StrAppendFormat(&plan,
                            "; WARNING: %.2f MiB stay resident, over the budget (%s, gradients "
                            "and activations are not offloaded)",
                            left / kMiB,
                            config_.zero == 3 ? "gathered units" : "parameters below zero=3");
    }
  }
  if (!moments_out) {
    if (leader() && !plan.empty()) std::printf("weft-train: %s\n", plan.c_str());
    return absl::OkStatus();
  }
  offload::TieredStoreOptions options;
  const std::string root =
      config_.offload_dir.empty() ? options_.out_dir + "/offload" : config_.offload_dir;
  options.dir = absl::StrFormat("%s/rank-%05d", root, group_.rank());
  // Tiles small enough that an average array spans at least 8 (so the stream's staging,
  // (prefetch + 2) tiles per array, stays a fraction of what it moves), blocks of at least 64 KiB
  // unless asked.
  const std::vector<size_t>& ranges = dp_->optimizer_ranges();
  const size_t per_array = moments / 2 / std::max<size_t>(1, ranges.size());
  options.block_bytes = static_cast<size_t>(config_.offload_block_kb) << 10;
  while (options.block_bytes > (size_t{64} << 10) && options.block_bytes * 8 > per_array) {
    options.block_bytes /= 2;
  }
  options.tile_blocks = static_cast<size_t>(config_.offload_tile_blocks);
  while (options.tile_blocks > 1 && options.block_bytes * options.tile_blocks * 8 > per_array) {
    --options.tile_blocks;
  }
  absl::StatusOr<std::unique_ptr<offload::TieredStore>> store =
      offload::TieredStore::Create(options);
  if (!store.ok()) return store.status();
  offload_store_ = *std::move(store);
  if (absl::Status s = dp_->OffloadOptimizer(offload_store_.get(), params_out); !s.ok()) return s;
  offload_seen_ = offload_store_->counters();
  if (leader()) {
    // Each step reads and writes every tile of every offloaded array once: a header block, and
    // the data padded to the I/O alignment.
    const size_t tile = offload_store_->tile_floats() * sizeof(float);
    double io = 0;
    for (size_t n : ranges) {
      const size_t bytes = n * sizeof(float);
      io += static_cast<double>(offload_store_->TileCount(n) * offload::kTileHeaderBytes +
                                offload::AlignUp(bytes));
    }
    io *= params_out ? 3 : 2;
    double read = io;
    if (params_out) {
      // And each slice before its unit's gathers: the embeddings once (they stay gathered for
      // the tied head), every other unit for its forward and again for its backward.
      for (size_t u = 0; u < ranges.size(); ++u) {
        const size_t bytes = ranges[u] * sizeof(float);
        read += (u == 0 ? 1.0 : 2.0) * static_cast<double>(offload_store_->TileCount(ranges[u]) *
                                                               offload::kTileHeaderBytes +
                                                           offload::AlignUp(bytes));
      }
    }
    std::printf(
        "weft-train: %s%soffload: AdamW's moments (%.2f MiB per rank)%s in %s via %s (%s), "
        "tiles of %.0f KiB; predicted I/O per step and rank: read %.2f MiB, write %.2f MiB\n",
        plan.c_str(), plan.empty() ? "" : "\nweft-train: ", moments / kMiB,
        params_out ? absl::StrFormat(" and parameter slices (%.2f MiB)", params / kMiB).c_str()
                   : "",
        root.c_str(), std::string(offload_store_->engine().name()).c_str(),
        offload_store_->io_mode().c_str(), tile / 1024.0, read / kMiB, io / kMiB);
  }
  return absl::OkStatus();
}

void Run::OffloadFigures(int64_t* read, int64_t* written, int64_t* resident) {
  *read = *written = 0;
  if (offload_store_ != nullptr) {
    const offload::IoCounters& now = offload_store_->counters();
    *read = static_cast<int64_t>(now.bytes_read - offload_seen_.bytes_read);
    *written = static_cast<int64_t>(now.bytes_written - offload_seen_.bytes_written);
    offload_seen_ = now;
  }
  *resident = ResidentBytes();
}

}  // namespace weft::trainer
