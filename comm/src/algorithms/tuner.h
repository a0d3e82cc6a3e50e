// Tuner: which algorithm should carry out a collective, and how long it should take.
//
// The selector asks the tuner whenever WEFT_ALGO does not force a choice. The interface is narrow
// (as NCCL's tuner plugins): a collective, its bytes and the communicator's shape go in; an
// algorithm and its predicted time come out. CostTuner, the built-in one, prices every algorithm
// that implements the collective and can run on this layout with an alpha-beta formula over the
// link classes of a CostModel, NCCL-style time = latency + bytes / bandwidth, and takes the
// cheapest, or over several nodes a hierarchical broadcast or all-reduce past 8 KiB when it comes
// within a few percent of that (kHierarchyMargin in tuner.cc); up to 8 KiB a hierarchical
// algorithm must be that much cheaper than every other (kShortBytes). Over several nodes a
// formula is moved onto its algorithm's anchors, the times the whole collective measured at a
// few sizes (tuner_model.h), where the model has them. Every rank holds the same model (rank
// 0's, shared at creation), so every rank picks the same algorithm.
//
// Bytes are those the communicator passes the selector: the buffer of an all-reduce, broadcast
// or reduce; all ranks' blocks together for reduce-scatter, all-gather and all-to-all.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/tuner_model.h"
#include "op_kind.h"

namespace weft {

// What the tuner knows of the communicator's layout.
struct TuningShape {
  int ranks = 1;
  int nodes = 1;
  int lanes = 1;                // NodeLayout::lanes(): ranks per node on the smallest node
  int max_local = 1;            // ranks on the largest node
  bool arena = false;           // every rank shares this host's arena (shm_direct can run)
  bool remote_read = false;     // and may read the others' memory (cma_direct can run)
  bool shared_buffers = false;  // buffers come from AllocShared (CommOptions::shared_buffers)

  static TuningShape Of(const Peers& peers);
};

struct TunerChoice {
  AlgorithmId algorithm = AlgorithmId::kRing;
  double predicted_s = 0;
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual TunerChoice Choose(OpKind kind, size_t bytes, const TuningShape& shape) const = 0;
  // The predicted time of `algorithm`, or a negative number when the tuner cannot price it here.
  virtual double Predict(AlgorithmId algorithm, OpKind kind, size_t bytes,
                         const TuningShape& shape) const = 0;
  // Every algorithm it would consider for the collective here, with its predicted time, the
  // choice among them (the selector's trials time those priced near the choice); a tuner that
  // prices nothing but its choice returns that alone.
  virtual std::vector<TunerChoice> Priced(OpKind kind, size_t bytes,
                                          const TuningShape& shape) const {
    return {Choose(kind, bytes, shape)};
  }
  // One line for logs and benchmarks: every candidate with its prediction, and the model.
  virtual std::string Explain(OpKind kind, size_t bytes, const TuningShape& shape) const = 0;
};

class CostTuner final : public Tuner {
 public:
  explicit CostTuner(CostModel model) : model_(std::move(model)) {}

  TunerChoice Choose(OpKind kind, size_t bytes, const TuningShape& shape) const override;
  double Predict(AlgorithmId algorithm, OpKind kind, size_t bytes,
                 const TuningShape& shape) const override;
  std::vector<TunerChoice> Priced(OpKind kind, size_t bytes,
                                  const TuningShape& shape) const override;
  std::string Explain(OpKind kind, size_t bytes, const TuningShape& shape) const override;

  const CostModel& model() const { return model_; }

 private:
  // `algorithm`'s alpha-beta price of `n` bytes before any anchor moves it; negative where it
  // cannot run.
  double Formula(AlgorithmId algorithm, OpKind kind, double n, const TuningShape& shape) const;
  // The algorithms priced for `kind` on `shape`, in order of preference on equal predictions.
  std::vector<AlgorithmId> Candidates(OpKind kind, const TuningShape& shape) const;

  CostModel model_;
};

}  // namespace weft
