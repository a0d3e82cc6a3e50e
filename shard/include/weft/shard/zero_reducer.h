// ZeroReducer: the state ZeRO shards over a ShardLayout, and the collectives that move it.
//
//   auto zero = weft::shard::ZeroReducer::Create(comm, layout, &grads, &params, options);
//   (*zero)->LoadShard();                         // this rank's slices of the initial parameters
//   (*zero)->BeginBackward(/*sync=*/last_micro_step);
//   ... backward: (*zero)->MarkUnitReady(u) as each unit's gradient becomes final ...
//   absl::Status s = (*zero)->Finish();           // GradSlice(u): this rank's averaged slices
//   ... clip GradSlice(u), update ParamSlice(u) for every unit u ...
//   s = (*zero)->GatherParams();                  // stages 1-2: the full parameters, everywhere
//
// `grads` and `params` are the full flat buffers the layout describes. ParamSlice(u) is where this
// rank's slice of unit u's parameters lives (the optimizer updates it there) and GradSlice(u)
// where its slice of the averaged gradient lands: each stage keeps one copy of each, nothing
// twice. A unit's gradient is reduce-scattered (kAvg) into GradSlice(u), one collective per unit,
// issued last unit first (the order backward finishes them) on every rank: a unit that is ready
// waits for the units after it, because collectives must match across ranks. With sync = false
// (gradient accumulation's non-final micro-steps) nothing is communicated.
//
//   stage 1  the reduce-scatters are issued by Finish, in place in `grads`: GradSlice(u) is this
//            rank's owned range of unit u there (the rest of the unit holds partial sums after
//            it, or under a 16-bit wire this rank's own gradient). Parameter slices live in place
//            in `params` (ParamSlice(u) is the owned range), and GatherParams all-gathers every
//            unit in place.
//   stage 2  a unit's full gradient lives in a pooled buffer (GradientsFor(u), zeroed, BufferPool)
//            from backward's first write to the completion of its reduce-scatter, which is issued
//            as soon as the unit is ready; `grads` is not used, and the gradient slices are kept
//            compact, back to back. Parameters as stage 1.
//   stage 3  as 2, and the parameter slices too are kept compact; a unit's full parameters live
//            in a pooled buffer only around their use: Acquire(u) all-gathers unit u into one (or
//            waits for its prefetch), Prefetch(u) starts that early while the gathered bytes stay
//            within max_gathered_bytes, ReleaseParams(u) returns it. GatherParams releases every
//            unit instead (the next pass gathers them); `params` holds the full parameters only
//            for LoadShard and GatherAllParams.
//
// Hybrid sharding: `comm` is one shard group (ZeroOptions::replicas the ranks holding the same
// slices in the other groups). After a unit's reduce-scatter inside the group, its slice of the
// gradient is all-reduced (averaged) across the replicas, issued in the same fixed order.
//
// Mixed precision's 16-bit wire (ZeroOptions::wire_type kFloat16 or kBFloat16) halves the
// gradient traffic: when a unit is issued its gradient is rounded (to nearest, ties to even) into
// a pooled 16-bit copy (stages 2-3 then give the full fp32 gradient back at once), which is
// reduce-scattered (kAvg) in place as that type; under hybrid sharding this rank's 16-bit slice is
// then all-reduced across the replicas, still 16-bit, once the reduce-scatter has completed. Only
// after the unit's last collective is the slice widened into GradSlice(u) (by Finish at the
// latest) and the copy returned. Parameter all-gathers stay fp32.
//
// Gradient compression (ZeroOptions::compression, fp32 wire, no hybrid sharding): each unit's
// reduce-scatter is a CompressedReduceScatter of its own (weft/comm/compressed_reduce_scatter.h:
// one all-to-all of encoded chunks, error feedback kept per unit), run to completion when the
// unit is issued, so backward waits for it; chunk r of a unit is exactly rank r's slice, because
// the layout pads units to equal slices. Parameter all-gathers stay fp32.
//
// Create is collective: every rank must pass the same layout, wire type and codec (the layout's
// hash, with the wire type mixed in, is compared, and a mismatch names both ranks). Not
// thread-safe: one thread runs the passes and calls everything here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "weft/comm/communicator.h"
#include "weft/comm/compressed_reduce_scatter.h"
#include "weft/comm/work.h"
#include "weft/kernels/dtype.h"
#include "weft/shard/buffer_pool.h"
#include "weft/shard/flat_buffer.h"
#include "weft/shard/shard_layout.h"

namespace weft::shard {

// Stage 3 with its parameter slices kept outside the reducer (offloaded): the reducer reads unit
// u's slice through Fetch just before gathering the unit, and LoadShard writes the slices through
// Store. Both move layout().slice(u) floats.
class SliceStore {
 public:
  virtual ~SliceStore() = default;
  virtual absl::Status Fetch(int unit, float* into) = 0;
  virtual absl::Status Store(int unit, const float* from) = 0;
};

struct ZeroOptions {
  int stage = 1;
  // Stage 3: the most bytes of gathered parameters alive at once; the unit in use is gathered
  // whatever its size, prefetches only within the cap.
  size_t max_gathered_bytes = size_t{1} << 30;
  absl::Duration timeout = absl::Seconds(300);  // bounds each wait
  // Hybrid sharding: the ranks that hold this rank's slices in the other shard groups (null:
  // `comm` is every rank). Must outlive the reducer.
  Communicator* replicas = nullptr;
  // The type gradients are reduced in: kFloat32 (the gradients' own), kFloat16 or kBFloat16.
  DataType wire_type = DataType::kFloat32;
  // Compressed reduce-scatters instead of the fp32 ones (see the top of this file).
  std::optional<CompressionOptions> compression;
};

class ZeroReducer {
 public:
  // `comm` (of layout.ranks() ranks), `grads` and `params` (layout.total() elements each) must
  // outlive the reducer.
  static absl::StatusOr<std::unique_ptr<ZeroReducer>> Create(Communicator* comm, ShardLayout layout,
                                                             FlatBuffer* grads, FlatBuffer* params,
                                                             const ZeroOptions& options = {});
  ~ZeroReducer();
  ZeroReducer(const ZeroReducer&) = delete;
  ZeroReducer& operator=(const ZeroReducer&) = delete;

  const ShardLayout& layout() const { return layout_; }
  int stage() const { return options_.stage; }
  // This rank's slice of unit u's parameters (layout().slice(u) elements), wherever the stage
  // keeps it: stages 1-2 its owned range of `params`, stage 3 a compact copy; null once the
  // slices live in a SliceStore.
  float* ParamSlice(int u);
  // Stage 3: the slices move out to `store` (which must outlive the reducer), through its Store,
  // and their memory is freed; from now on gathers Fetch each slice into a pooled buffer first,
  // and LoadShard stores into it.
  absl::Status MoveSlicesTo(SliceStore* store);
  // This rank's slice of unit u's averaged gradient after Finish (layout().slice(u) elements):
  // stage 1 its owned range of `grads`, stages 2-3 a compact copy.
  float* GradSlice(int u);
  // Takes this rank's slices of the full parameters (after they were initialised or loaded
  // there): stages 1-2 keep them in place, so nothing moves; stage 3 copies them out (or stores
  // them in its SliceStore) and releases the full parameters. Errors: the SliceStore's.
  absl::Status LoadShard();

  // Starts a backward pass. sync = false: accumulate locally, communicate nothing.
  void BeginBackward(bool sync);
  // Where unit u's full gradient is accumulated this pass: stages 2-3 a pooled buffer (zeroed
  // when first handed out, kept until its reduction completes), stage 1 its range of `grads`.
  float* GradientsFor(int u);
  // Where unit u's full parameters are: stage 3 the buffer Acquire filled, else its range of
  // `params`.
  float* ParamsOf(int u);
  // Unit u's gradient is final for this pass. Errors: u out of range, marked twice in a pass, no
  // BeginBackward.
  absl::Status MarkUnitReady(int u);
  // Issues what is left and waits for every unit's reduce-scatter; stages 2-3 release the full
  // gradients. Errors name the unit: one never marked ready, a failed collective, the timeout.
  absl::Status Finish();
  // Stages 1-2: all-gathers every unit's parameters from the shards. Stage 3: releases them.
  absl::Status GatherParams();
  // Every unit's full parameters gathered into `params` (also under stage 3): for a forward pass
  // on one rank alone, which then reads `params`.
  absl::Status GatherAllParams();
  // Stage 3: returns every unit's gathered buffer.
  void ReleaseAllParams();

  // Stage 3 residency (no-ops below stage 3).
  absl::Status Acquire(int u);
  void Prefetch(int u);
  void ReleaseParams(int u);

  // Compression configured: whether passes from now on compress (warm-up steps do not).
  void set_compression_active(bool active) { compression_active_ = active; }
  bool compressing() const { return compression_active_ && !compressed_.empty(); }
  // Every unit's error-feedback state, back to back, and its restore (the same sizes).
  std::vector<float> compression_errors() const;
  absl::Status RestoreCompressionErrors(const std::vector<float>& errors);

  // Time blocked on communication since the last TakeWait().
  absl::Duration TakeWait();
  // Bytes this rank has sent in reduce-scatters, replica all-reduces and parameter all-gathers so
  // far, counted as a ring sends them ((N-1)/N of each collective's buffer, twice for an
  // all-reduce): the algorithm-independent volume the ZeRO paper's traffic model counts. Gradient
  // elements count at the wire type's width; compressed reduce-scatters count the bytes sent.
  uint64_t bytes_sent() const { return bytes_sent_; }
  // The most bytes of full gradients (stages 2-3), and of gathered parameters (stage 3), held at
  // once so far.
  size_t peak_gradient_bytes() const { return grad_pool_.peak_bytes(); }
  size_t peak_gathered_bytes() const { return param_pool_.peak_bytes(); }
  // 16-bit wire: the most bytes of the units' rounded gradient copies held at once so far (a few
  // pad bytes per buffer included); 0 otherwise.
  size_t peak_wire_bytes() const { return wire_pool_.peak_bytes(); }

 private:
  ZeroReducer(Communicator* comm, ShardLayout layout, FlatBuffer* grads, FlatBuffer* params,
              const ZeroOptions& options);
  absl::Status CheckLayoutAcrossRanks();
  // The units' compressed reduce-scatters, in unit order (empty without compression).
  std::vector<CompressedReduceScatter*> Compressors() const;
  void IssueReadyUnits();
  // Hybrid: issues, in order, the replica all-reduce of every unit whose reduce-scatter has
  // completed (`wait`: waiting for each in turn).
  absl::Status IssueReplicaReductions(bool wait);
  // Releases the gradients of units whose reduce-scatter has completed (stages 2-3), and widens
  // the 16-bit slices of units whose last collective has completed.
  void ReleaseReducedGradients();
  // Unit u's last collective of this pass (the replica all-reduce under hybrid sharding) has been
  // issued and has completed.
  bool Reduced(int u) const;
  // 16-bit wire: unit u's rounded copy, and this rank's slice of it.
  uint16_t* WireOf(int u);
  uint16_t* WireSlice(int u);
  // 16-bit wire: rounds unit u's gradient into a pooled copy (stages 2-3 give the gradient back).
  void Narrow(int u);
  // 16-bit wire: widens this rank's reduced slice into GradSlice(u) and returns the copy.
  void Widen(int u);
  absl::Status Wait(Work& work, const char* what, int u);
  // Starts the all-gather of unit u into `into` (fetching its slice first from a SliceStore).
  absl::StatusOr<Work> GatherUnit(int u, float* into);
  // Waits for unit u's gather into gathered_[u] and returns its fetched slice, if any.
  absl::Status WaitGather(int u);

  Communicator* comm_;
  ShardLayout layout_;
  FlatBuffer* grads_;
  FlatBuffer* params_;
  ZeroOptions options_;
  std::vector<float> shard_params_;  // stage 3: the parameter slices, back to back
  std::vector<float> shard_grads_;   // stages 2-3: the gradient slices, back to back
  std::vector<char> ready_;          // per unit, this pass
  std::vector<Work> reductions_;     // per unit, this pass
  std::vector<Work> replica_sums_;   // per unit, this pass (hybrid)
  // Per unit (compression): its reduce-scatter, and this pass's outcome of it.
  std::vector<std::unique_ptr<CompressedReduceScatter>> compressed_;
  std::vector<absl::Status> compressed_results_;
  bool compression_active_ = true;
  std::vector<float*> unit_grads_;     // per unit (stages 2-3): its pooled gradient, or null
  std::vector<float*> gathered_;       // per unit (stage 3): its pooled parameters, or null
  std::vector<Work> gathers_;          // per unit (stage 3): the gather into gathered_
  SliceStore* slice_store_ = nullptr;  // stage 3: where the slices live when not here
  std::vector<float*> fetched_;        // per unit: its slice fetched for a gather in flight
  absl::Status prefetch_error_;        // a Prefetch's fetch that failed, for the next Acquire
  // Per unit (16-bit wire): its rounded gradient from issue until widened, or null. Pool storage
  // that is only ever accessed as uint16_t (taken unzeroed, never read as float).
  std::vector<float*> wire_;
  BufferPool grad_pool_, param_pool_, wire_pool_, slice_pool_;
  int next_to_issue_ = 0;          // counts units issued, last unit first
  int next_replica_to_issue_ = 0;  // the same for the replica all-reduces
  bool in_pass_ = false;
  bool sync_ = true;
  absl::Duration waited_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace weft::shard
