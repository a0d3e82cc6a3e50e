#include "algorithms/tuner.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {
namespace {

// Preference on equal predictions: the specialised algorithms first.
constexpr AlgorithmId kAllAlgorithms[] = {
    AlgorithmId::kShmDirect,         AlgorithmId::kCmaDirect, AlgorithmId::kHierarchical,
    AlgorithmId::kRabenseifner,      AlgorithmId::kRing,      AlgorithmId::kTree,
    AlgorithmId::kRecursiveDoubling, AlgorithmId::kPairwise,  AlgorithmId::kDissemination};

// Chunk and round sizes of the implementations (ring.cc, tree.cc, shm_direct.cc,
// hierarchical_*.cc); they set how many latencies a large message pays.
constexpr double kTreeChunkBytes = 512 << 10;
constexpr double kLaneChunkBytes = 1 << 20;

// Over several nodes a hierarchical broadcast or all-reduce larger than kShortBytes priced within
// this factor of the cheapest is taken: it keeps every lane's connection busy, so more data is in
// flight than any one link class holds.
constexpr double kHierarchyMargin = 1.05;
// Up to this size the hierarchy is never taken: its extra phases cost hand-offs between ranks
// that no link's alpha holds, which the model would otherwise price as free.
constexpr size_t kShortBytes = 32 << 10;

double Log2Ceil(int p) { return p <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(p))); }
bool PowerOfTwo(int p) { return (p & (p - 1)) == 0; }

std::string Micros(double seconds) { return absl::StrFormat("%.1f us", seconds * 1e6); }

}  // namespace

CommLayout CommLayout::Of(const Peers& peers, bool alloc_shared_buffers) {
  const NodeLayout& nodes = peers.nodes();
  CommLayout shape;
  shape.ranks = peers.size();
  shape.nodes = nodes.num_nodes();
  shape.lanes = nodes.lanes();
  shape.max_local = nodes.max_local_size();
  shape.arena = peers.arena() != nullptr;
  shape.remote_read = Usable(AlgorithmId::kCmaDirect, peers);
  shape.alloc_shared_buffers = alloc_shared_buffers;
  shape.oversubscribed = peers.oversubscribed();
  return shape;
}

std::vector<AlgorithmId> CostTuner::Candidates(OpKind kind, const CommLayout& shape) const {
  // On one host every collective the arena families implement runs on the arena: their
  // fingerprints meet there, so a rank that calls a different collective is caught at once,
  // whereas a link algorithm on one rank and an arena one on another would wait on each other
  // until the timeout. Two exceptions compete with the tree: a reduce, which the arena carries
  // out with an all-reduce's copies where the tree moves the data to the root once; and ranks
  // that share cores, where the arena's lockstep rounds are dear and a tree needs only a parent
  // and a child running at a time.
  const bool arena_only = shape.arena && !shape.oversubscribed && kind != OpKind::kReduce &&
                          Implements(AlgorithmId::kShmDirect, kind);
  std::vector<AlgorithmId> candidates;
  for (AlgorithmId id : kAllAlgorithms) {
    if (!Implements(id, kind)) continue;
    if (id == AlgorithmId::kShmDirect && !shape.arena) continue;
    if (id == AlgorithmId::kCmaDirect && !shape.remote_read) continue;
    if (id == AlgorithmId::kHierarchical && shape.nodes < 2) continue;
    if (arena_only && id != AlgorithmId::kShmDirect && id != AlgorithmId::kCmaDirect) continue;
    candidates.push_back(id);
  }
  return candidates;
}

double CostTuner::Predict(AlgorithmId algorithm, OpKind kind, size_t bytes,
                          const CommLayout& shape) const {
  return Formula(algorithm, kind, static_cast<double>(bytes), shape);
}

double CostTuner::Formula(AlgorithmId algorithm, OpKind kind, double n,
                          const CommLayout& shape) const {
  if (!Implements(algorithm, kind)) return -1;
  const int p = shape.ranks;
  if (p <= 1) return 0;
  const double share = static_cast<double>(p - 1) / p;
  // Flat algorithms move at the pace of their slowest link. Over ranks numbered node by node,
  // a ring step or a tree level has one message on each node's link at a time, and gets the
  // bandwidth of a lone flow (net_flow; never less than in company), while Rabenseifner's and the
  // pairwise exchange's steps across nodes send from every rank at once. The latency stays
  // net's: it was measured with every rank running, as they all run in a collective.
  const LinkCost flat =
      shape.nodes > 1 ? model_.Get("net", shape.nodes) : model_.Get("shm", shape.ranks);
  const double a = flat.alpha(), b = flat.beta(), g = model_.gamma();
  const double b1 =
      shape.nodes > 1 ? std::min(b, model_.Get(CostModel::kNetFlow, shape.nodes).beta()) : b;
  const double log_p = Log2Ceil(p);
  // Recursive halving and doubling pair ranks at distance 1, 2, 4, ...: over nodes of equal
  // power-of-two sizes numbered node by node, the first log(per_node) steps stay in a node.
  const int per_node = shape.lanes;
  const bool steps_in_node_first =
      shape.nodes > 1 && PowerOfTwo(p) && shape.max_local == per_node && PowerOfTwo(per_node);

  switch (algorithm) {
    case AlgorithmId::kRing:
      switch (kind) {
        case OpKind::kAllReduce:
          return 2 * (p - 1) * a + 2 * share * n * b1 + share * n * g;
        case OpKind::kReduceScatter:
        case OpKind::kReduceScatterV:
          return (p - 1) * a + share * n * (b1 + g);
        default:  // all-gather
          return (p - 1) * a + share * n * b1;
      }
    case AlgorithmId::kRabenseifner: {
      if (steps_in_node_first) {
        // The steps inside nodes and across them, each group moving its bytes: the halving
        // pairs a node's ranks first, leaving 1/per_node of the buffer to cross, and the
        // doubling retraces it; the reduce-scatter and the all-gather also copy the buffer into
        // bit-reversed block order (rabenseifner.h), priced at the reduction kernel's speed.
        const LinkCost node = model_.Get("shm", per_node);
        const double node_share = static_cast<double>(per_node - 1) / per_node;
        const double across_share = static_cast<double>(shape.nodes - 1) / shape.nodes;
        const double half = Log2Ceil(per_node) * node.alpha() + node_share * n * node.beta() +
                            Log2Ceil(shape.nodes) * a + across_share * n / per_node * b;
        switch (kind) {
          case OpKind::kReduceScatter:
            return half + share * n * g + n * g;
          case OpKind::kAllGather:
            return half + n * g;
          default:
            return 2 * half + share * n * g;
        }
      }
      // Halving, doubling, or both; the extra ranks' fold and unfold move the whole input and
      // one block (reduce-scatter), one block and the whole output (all-gather), or the whole
      // buffer twice (all-reduce). Over nodes without a fold, the reduce-scatter and the
      // all-gather copy the buffer into bit-reversed block order.
      const bool fold = !PowerOfTwo(p);
      const double permute = shape.nodes > 1 && !fold ? n * g : 0;
      switch (kind) {
        case OpKind::kReduceScatter:
          return log_p * a + share * n * (b + g) + permute +
                 (fold ? 2 * a + (n + n / p) * b + n * g : 0);
        case OpKind::kAllGather:
          return log_p * a + share * n * b + permute + (fold ? 2 * a + (n + n / p) * b : 0);
        default:
          return 2 * log_p * a + 2 * share * n * b + share * n * g +
                 (fold ? 2 * (a + n * b) + n * g : 0);
      }
    }
    case AlgorithmId::kRecursiveDoubling: {
      // log p exchanges of the whole buffer, each reduced; the fold sends it twice more.
      if (steps_in_node_first) {
        const LinkCost node = model_.Get("shm", per_node);
        return Log2Ceil(per_node) * (node.alpha() + n * node.beta() + n * g) +
               Log2Ceil(shape.nodes) * (a + n * b + n * g);
      }
      double t = log_p * (a + n * b + n * g);
      if (!PowerOfTwo(p)) t += 2 * (a + n * b) + n * g;
      return t;
    }
    case AlgorithmId::kTree: {
      // Pipelined binomial tree: each level forwards chunk by chunk; the root sends the whole
      // buffer to each of its log p children. Over ranks numbered node by node (as launchers
      // number them) the first log(nodes) levels cross nodes and the rest stay inside them.
      const double chunks = std::max(1.0, std::ceil(n / kTreeChunkBytes));
      const double across = shape.nodes > 1 ? Log2Ceil(shape.nodes) : 0;
      const double inside = std::max(0.0, log_p - across);
      const LinkCost local = model_.Get("shm", shape.max_local);
      double t =
          (chunks - 1) * a + across * (a + n * b1) + inside * (local.alpha() + n * local.beta());
      if (kind == OpKind::kReduce) t += log_p * n * g;
      return t;
    }
    case AlgorithmId::kPairwise:
      return (p - 1) * (a + n / p * b);
    case AlgorithmId::kDissemination:
      return log_p * a;
    case AlgorithmId::kShmDirect:
    case AlgorithmId::kCmaDirect: {
      // Each collective has a class of its own; a reduce makes the copies of an all-reduce,
      // and a barrier costs what its fixed part does.
      if (!(algorithm == AlgorithmId::kShmDirect ? shape.arena : shape.remote_read)) return -1;
      const OpKind measured =
          kind == OpKind::kReduce || kind == OpKind::kBarrier ? OpKind::kAllReduce : kind;
      // cma_direct reads AllocShared buffers with plain loads, others through the kernel.
      const char* measured_as = algorithm == AlgorithmId::kCmaDirect && shape.alloc_shared_buffers
                                    ? CostModel::kCmaDirectShared
                                    : Name(algorithm);
      int measured_ranks = p;
      const LinkCost cost =
          model_.Get(CostModel::CollectiveClass(measured_as, Name(measured)), p, &measured_ranks);
      // Measured on another group size: the ranks share the memory bus, so what the bytes add
      // grows with their number.
      const double bytes = kind == OpKind::kBarrier ? 0 : n;
      // Ranks that share cores reach a round one after another, each after a context switch,
      // which costs about what a link step does.
      const double wake = shape.oversubscribed ? (p - 1) * model_.Get("shm", p).alpha() : 0;
      return cost.alpha() + wake + bytes * cost.beta() * p / std::max(1, measured_ranks);
    }
    case AlgorithmId::kHierarchical: {
      if (shape.nodes < 2) return -1;
      const LinkCost local = model_.Get("shm", shape.max_local);
      const LinkCost net = model_.Get("net", shape.nodes);
      const int m = shape.lanes, gmax = shape.max_local, nodes = shape.nodes;
      const double lane = n / m;
      const double across_share = static_cast<double>(nodes - 1) / nodes;
      // In the node a lane rank takes in (g-1) pieces of its lane; a rank without a lane sends
      // all n bytes out. Where every rank has a lane, each moves only the (g-1) pieces.
      const double node_bytes = gmax > m ? std::max(n, (gmax - 1) * lane) : (gmax - 1) * lane;
      const double in_node = gmax > 1 ? local.alpha() + node_bytes * local.beta() : 0;
      // A rank without a lane hands its block to a lane rank, or gets it back, in one more step.
      const double hand_off = gmax > m ? local.alpha() + n / p * local.beta() : 0;
      // Pipelined chunk by chunk, the slower of the phases across and inside nodes sets the pace
      // and the other adds one chunk's worth; ranks that share cores run them in turn instead.
      auto pipelined = [&](double across, double local_phases, double chunks) {
        if (shape.oversubscribed) return across + local_phases;
        return std::max(across, local_phases) + std::min(across, local_phases) / chunks;
      };
      switch (kind) {
        case OpKind::kAllReduce: {
          const double chunks = std::max(1.0, std::ceil(lane / kLaneChunkBytes));
          const double across = chunks * 2 * (nodes - 1) * net.alpha() +
                                2 * across_share * lane * net.beta() + across_share * lane * g;
          const double reduce = gmax > 1 ? (gmax - 1) * lane * g : 0;
          return pipelined(across, 2 * in_node + reduce, chunks);
        }
        case OpKind::kReduceScatter:
          return in_node + (gmax > 1 ? (gmax - 1) * lane * g : 0) + (nodes - 1) * net.alpha() +
                 across_share * lane * (net.beta() + g) + hand_off;
        case OpKind::kAllGather:
          return hand_off + (nodes - 1) * net.alpha() + across_share * lane * net.beta() + in_node;
        default: {  // broadcast: scatter to lanes, a tree per lane across nodes, spread
          const double chunks = std::max(1.0, std::ceil(lane / kLaneChunkBytes));
          const double across =
              (Log2Ceil(nodes) + chunks - 1) * net.alpha() + Log2Ceil(nodes) * lane * net.beta();
          return pipelined(across, 2 * in_node, chunks);
        }
      }
    }
  }
  return -1;
}

std::vector<Priced> CostTuner::PriceAll(OpKind kind, size_t bytes, const CommLayout& shape) const {
  std::vector<Priced> priced;
  for (AlgorithmId id : Candidates(kind, shape)) {
    const double t = Predict(id, kind, bytes, shape);
    if (t >= 0) priced.push_back({id, t});
  }
  return priced;
}

Priced CostTuner::Choose(OpKind kind, size_t bytes, const CommLayout& shape) const {
  const std::vector<Priced> priced = PriceAll(kind, bytes, shape);
  if (priced.empty()) {
    // Nothing priced (a collective without candidates here): the one algorithm that does it.
    return {Implements(AlgorithmId::kPairwise, kind) ? AlgorithmId::kPairwise : AlgorithmId::kRing,
            -1};
  }
  Priced best = priced.front();
  for (const Priced& candidate : priced) {
    if (candidate.seconds < best.seconds) best = candidate;
  }
  const auto hierarchy = std::find_if(priced.begin(), priced.end(), [](const Priced& candidate) {
    return candidate.algorithm == AlgorithmId::kHierarchical;
  });
  if (hierarchy == priced.end()) return best;
  if (bytes <= kShortBytes) {
    std::optional<Priced> flat;
    for (const Priced& candidate : priced) {
      if (candidate.algorithm == AlgorithmId::kHierarchical) continue;
      if (!flat || candidate.seconds < flat->seconds) flat = candidate;
    }
    return flat.value_or(best);
  }
  const bool near_tie_to_hierarchy = kind == OpKind::kBroadcast || kind == OpKind::kAllReduce;
  if (near_tie_to_hierarchy && hierarchy->seconds <= kHierarchyMargin * best.seconds) {
    return *hierarchy;
  }
  return best;
}

std::string CostTuner::Explain(OpKind kind, size_t bytes, const CommLayout& shape) const {
  const Priced choice = Choose(kind, bytes, shape);
  std::string text = absl::StrCat(
      Name(kind), " ", bytes, " bytes on ", shape.ranks, " ranks, ", shape.nodes,
      shape.nodes == 1 ? " node" : " nodes", shape.oversubscribed ? " sharing cores" : "", ": ",
      Name(choice.algorithm), " predicted ", Micros(choice.seconds), " (");
  bool first = true;
  for (const Priced& candidate : PriceAll(kind, bytes, shape)) {
    absl::StrAppend(&text, first ? "" : ", ", Name(candidate.algorithm), " ",
                    Micros(candidate.seconds));
    first = false;
  }
  absl::StrAppend(&text, "; model: ", model_.source(), ")");
  return text;
}

}  // namespace weft
