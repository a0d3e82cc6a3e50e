// CostTuner: which algorithm should carry out a collective, and how long it should take.
//
// It prices every algorithm that implements the collective and can run on the communicator's
// layout with an alpha-beta formula over the classes of a CostModel (tuner_model.h), NCCL-style
// time = latency + bytes / bandwidth, and takes the cheapest, or over several nodes a
// hierarchical broadcast or all-reduce past 32 KiB when it comes within a few percent of that
// (kHierarchyMargin in tuner.cc); up to 32 KiB never a hierarchical one (kShortBytes). On one
// host the direct algorithms run every collective they implement, except that the tree competes
// for reduces, and where the ranks share cores (a direct algorithm's rounds then wait for every
// rank to be scheduled) all link algorithms compete. It is a pure function of (collective, bytes,
// layout, model): every rank holds the same model (rank 0's, shared at creation) and layout, so
// every rank picks the same algorithm on every call and run.
//
// Bytes are those the communicator passes the selector: the buffer of an all-reduce, broadcast
// or reduce; all ranks' blocks together for reduce-scatter, all-gather and all-to-all and their
// *_v forms, except all_to_all_v: this rank's send blocks, which differ by rank (only pairwise
// implements it, so the pick cannot).
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/tuner_model.h"
#include "op_kind.h"

namespace weft {

// What the tuner knows of the communicator: the same on every rank.
struct CommLayout {
  int ranks = 1;
  int nodes = 1;
  int lanes = 1;                      // NodeLayout::lanes(): ranks per node on the smallest node
  int max_local = 1;                  // ranks on the largest node
  bool arena = false;                 // every rank shares this host's arena (shm_direct can run)
  bool remote_read = false;           // and may read the others' memory (cma_direct can run)
  bool alloc_shared_buffers = false;  // CommOptions::shared_buffers: buffers from AllocShared
  bool oversubscribed = false;        // the ranks share cores (agreed at creation)

  static CommLayout Of(const Peers& peers, bool alloc_shared_buffers);
};

struct Priced {
  AlgorithmId algorithm = AlgorithmId::kRing;
  double seconds = 0;
};

class CostTuner {
 public:
  explicit CostTuner(CostModel model) : model_(std::move(model)) {}

  Priced Choose(OpKind kind, size_t bytes, const CommLayout& shape) const;
  // The predicted time of `algorithm`, or a negative number where it cannot run.
  double Predict(AlgorithmId algorithm, OpKind kind, size_t bytes, const CommLayout& shape) const;
  // Every candidate for the collective here with its predicted time.
  std::vector<Priced> PriceAll(OpKind kind, size_t bytes, const CommLayout& shape) const;
  // One line for logs and tools: the choice, every candidate's prediction, and the model's source.
  std::string Explain(OpKind kind, size_t bytes, const CommLayout& shape) const;

  const CostModel& model() const { return model_; }

 private:
  double Formula(AlgorithmId algorithm, OpKind kind, double n, const CommLayout& shape) const;
  // The algorithms priced for `kind` on `shape`, in order of preference on equal predictions.
  std::vector<AlgorithmId> Candidates(OpKind kind, const CommLayout& shape) const;

  CostModel model_;
};

}  // namespace weft
