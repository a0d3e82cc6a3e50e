// DataParallel's state outside a step: checkpoints (this rank's pieces, and loading any layout's)
// and offloading (the moments and ZeRO-3's parameter slices moved to a TieredStore).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint.h"
#include "data_parallel.h"
#include "weft/offload/tile_stream.h"

namespace weft::trainer {

// Here, beside OffloadedSlices' definition: constructing and destroying its unique_ptr needs it.
DataParallel::DataParallel(const Config& config, Communicator* comm, Gpt* model,
                           Communicator* stages)
    : config_(config), comm_(comm), model_(model), tp_(model->tensor_parallel()), stages_(stages) {}

DataParallel::~DataParallel() {
  if (model_ != nullptr) model_->set_hooks(nullptr);
}

std::vector<std::pair<shard::Range, size_t>> DataParallel::MomentRanges() const {
  if (zero_ == nullptr) return {{{0, model_->layout().total()}, 0}};
  const shard::ShardLayout& shards = zero_->layout();
  std::vector<std::pair<shard::Range, size_t>> ranges;
  for (int u = 0; u < shards.num_units(); ++u) {
    ranges.push_back({shards.owned(shard_comm_->rank(), u), shards.shard_offset(u)});
  }
  return ranges;
}

void DataParallel::AddPieces(int tensor, size_t first, size_t count, std::vector<const float*> data,
                             std::vector<shard::SavedPiece>* pieces) const {
  const TensorView& view = model_->layout().tensor(tensor);
  if ((view.replicated && tp_.rank() != 0) || view.tied_copy) return;
  for (const TensorRun& run : model_->layout().GlobalRuns(tensor, first, count)) {
    std::vector<const float*> at;
    for (const float* d : data) at.push_back(d + (run.local - first));
    pieces->push_back({tensor, run.global, run.count, std::move(at)});
  }
}

std::vector<shard::SavedPiece> DataParallel::CheckpointPieces() {
  const ParamLayout& layout = model_->layout();
  std::vector<shard::SavedPiece> pieces;
  if (zero_ == nullptr) {
    // Rank r saves packed elements [r·P/N, (r+1)·P/N): the tensors in order, padding skipped.
    const int n = comm_ != nullptr ? comm_->size() : 1;
    const int r = comm_ != nullptr ? comm_->rank() : 0;
    const size_t total = layout.parameters();
    const size_t begin = total * r / n, end = total * (r + 1) / n;
    size_t packed = 0;
    for (size_t t = 0; t < layout.tensors().size(); ++t) {
      const TensorView& view = layout.tensor(static_cast<int>(t));
      const size_t first = std::max(begin, packed), last = std::min(end, packed + view.size);
      if (first < last) {
        const size_t at = view.offset + (first - packed);
        AddPieces(static_cast<int>(t), first - packed, last - first,
                  {model_->params() + at, adam_->m().data() + at, adam_->v().data() + at}, &pieces);
      }
      packed += view.size;
    }
    return pieces;
  }
  if (replicas_ != nullptr && replicas_->rank() != 0) return pieces;
  const shard::ShardLayout& shards = zero_->layout();
  for (int u = 0; u < shards.num_units(); ++u) {
    const shard::Range owned = shards.owned(shard_comm_->rank(), u);
    const UnitView& unit = layout.units()[u];
    for (int t = unit.first_tensor; t < unit.end_tensor; ++t) {
      const TensorView& view = layout.tensor(t);
      const size_t first = std::max(owned.begin, view.offset);
      const size_t last = std::min(owned.begin + owned.length, view.offset + view.size);
      if (first >= last) continue;
      const size_t in_slice = first - owned.begin;
      const size_t moment = shards.shard_offset(u) + in_slice;
      AddPieces(t, first - view.offset, last - first,
                {(slices_ != nullptr ? fetched_params_.data() + shards.shard_offset(u)
                                     : zero_->ParamSlice(u)) +
                     in_slice,
                 adam_->m().data() + moment, adam_->v().data() + moment},
                &pieces);
    }
  }
  return pieces;
}

absl::Status DataParallel::LoadCheckpoint(const shard::CheckpointReader& reader,
                                          int64_t optimizer_step) {
  const ParamLayout& layout = model_->layout();
  int arrays[3];
  for (int a = 0; a < 3; ++a) {
    arrays[a] = reader.FindArray(kCheckpointArrays[a]);
    if (arrays[a] < 0) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", reader.dir(), " has no array ", kCheckpointArrays[a]));
    }
  }
  std::vector<int> saved;  // per layout tensor, its index in the checkpoint
  for (const TensorView& view : layout.tensors()) saved.push_back(reader.FindTensor(view.name));
  // Every rank reads the whole parameters (ZeRO takes its slices from them), and the moments of
  // its own ranges only.
  for (size_t t = 0; t < saved.size(); ++t) {
    const TensorView& view = layout.tensor(static_cast<int>(t));
    for (const TensorRun& run : view.runs) {
      if (absl::Status s = reader.Read(saved[t], arrays[0], run.global, run.count,
                                       model_->params() + view.offset + run.local);
          !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = ParamsLoaded(); !s.ok()) return s;
  if (absl::Status s = adam_->FetchMoments(); !s.ok()) return s;
  for (const auto& [range, compact] : MomentRanges()) {
    for (size_t t = 0; t < saved.size(); ++t) {
      const TensorView& view = layout.tensor(static_cast<int>(t));
      const size_t first = std::max(range.begin, view.offset);
      const size_t last = std::min(range.begin + range.length, view.offset + view.size);
      if (first >= last) continue;
      const size_t at = compact + (first - range.begin);
      for (const TensorRun& run :
           layout.GlobalRuns(static_cast<int>(t), first - view.offset, last - first)) {
        const size_t to = at + (run.local - (first - view.offset));
        for (auto [array, moments] :
             {std::pair{arrays[1], &adam_->m()}, std::pair{arrays[2], &adam_->v()}}) {
          if (absl::Status s =
                  reader.Read(saved[t], array, run.global, run.count, moments->data() + to);
              !s.ok()) {
            return s;
          }
        }
      }
    }
  }
  adam_->set_step(optimizer_step);
  return adam_->StoreMoments();
}

// ZeRO-3's parameter slices in the store: unit u's is array AdamW::ParamArray(u) (the optimizer's
// owned range u is the unit's slice).
class DataParallel::OffloadedSlices : public shard::SliceStore {
 public:
  OffloadedSlices(offload::TieredStore* store, const shard::ShardLayout* layout)
      : store_(store), layout_(layout) {}
  absl::Status Fetch(int unit, float* into) override {
    return store_->Read(AdamW::ParamArray(unit), absl::MakeSpan(into, layout_->slice(unit)));
  }
  absl::Status Store(int unit, const float* from) override {
    const std::string name = AdamW::ParamArray(unit);
    const absl::Span<const float> slice = absl::MakeConstSpan(from, layout_->slice(unit));
    return store_->Contains(name) ? store_->Write(name, slice)
                                  : store_->Add(name, offload::Tier::kDisk, slice);
  }

 private:
  offload::TieredStore* store_;
  const shard::ShardLayout* layout_;
};

absl::Status DataParallel::OffloadOptimizer(offload::TieredStore* store, bool params) {
  if (params) {
    if (zero_ == nullptr || zero_->stage() < 3) {
      return absl::FailedPreconditionError(
          "offload=optimizer+params needs zero=3: only ZeRO-3 keeps parameters as slices apart "
          "from the units in use");
    }
    slices_ = std::make_unique<OffloadedSlices>(store, &zero_->layout());
    if (absl::Status s = zero_->MoveSlicesTo(slices_.get()); !s.ok()) return s;
  }
  // A step streams each moment (and the parameters), each through (prefetch + 2) staging tiles.
  offload_staging_bytes_ = (params ? 3 : 2) * (offload::StreamOptions().prefetch + 2) *
                           (store->tile_floats() * sizeof(float) + offload::kTileHeaderBytes);
  return adam_->Offload(store, params);
}

absl::Status DataParallel::FetchOffloaded() {
  if (slices_ != nullptr) {
    const shard::ShardLayout& shards = zero_->layout();
    fetched_params_.resize(shards.shard_size());
    for (int u = 0; u < shards.num_units(); ++u) {
      if (absl::Status s = slices_->Fetch(u, fetched_params_.data() + shards.shard_offset(u));
          !s.ok()) {
        return s;
      }
    }
  }
  return adam_->FetchMoments();
}

absl::Status DataParallel::ReleaseOffloaded() {
  std::vector<float>().swap(fetched_params_);
  return adam_->StoreMoments();
}

}  // namespace weft::trainer
