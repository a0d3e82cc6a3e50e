// The table of algorithms: names, which collectives each implements, and construction.
#include <array>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithm.h"
#include "algorithms/cma_direct.h"
#include "algorithms/dissemination.h"
#include "algorithms/hierarchical.h"
#include "algorithms/pairwise.h"
#include "algorithms/rabenseifner.h"
#include "algorithms/recursive_doubling.h"
#include "algorithms/ring.h"
#include "algorithms/shm_direct.h"
#include "algorithms/tree.h"

namespace weft {
namespace {

constexpr std::array<std::pair<AlgorithmId, const char*>, 9> kNames = {{
    {AlgorithmId::kRing, "ring"},
    {AlgorithmId::kRabenseifner, "rabenseifner"},
    {AlgorithmId::kShmDirect, "shm_direct"},
    {AlgorithmId::kTree, "tree"},
    {AlgorithmId::kPairwise, "pairwise"},
    {AlgorithmId::kDissemination, "dissemination"},
    {AlgorithmId::kHierarchical, "hierarchical"},
    {AlgorithmId::kCmaDirect, "cma_direct"},
    {AlgorithmId::kRecursiveDoubling, "recursive_doubling"},
}};

}  // namespace

const char* Name(AlgorithmId id) {
  for (const auto& [known, name] : kNames) {
    if (known == id) return name;
  }
  return "unknown";
}

std::optional<AlgorithmId> ParseAlgorithm(absl::string_view name) {
  for (const auto& [id, known] : kNames) {
    if (name == known) return id;
  }
  if (name == "halving_doubling" || name == "rhd") return AlgorithmId::kRabenseifner;
  if (name == "direct") return AlgorithmId::kShmDirect;
  if (name == "cma") return AlgorithmId::kCmaDirect;
  if (name == "binomial") return AlgorithmId::kTree;
  if (name == "hier") return AlgorithmId::kHierarchical;
  if (name == "rd") return AlgorithmId::kRecursiveDoubling;
  return std::nullopt;
}

bool Implements(AlgorithmId id, OpKind kind) {
  switch (id) {
    case AlgorithmId::kRing:
      return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter ||
             kind == OpKind::kAllGather || kind == OpKind::kReduceScatterV ||
             kind == OpKind::kAllGatherV;
    case AlgorithmId::kRabenseifner:
      return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter ||
             kind == OpKind::kAllGather;
    case AlgorithmId::kRecursiveDoubling:
      return kind == OpKind::kAllReduce;
    case AlgorithmId::kShmDirect:
      return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter ||
             kind == OpKind::kAllGather || kind == OpKind::kBroadcast || kind == OpKind::kReduce ||
             kind == OpKind::kBarrier;
    case AlgorithmId::kTree:
      return kind == OpKind::kBroadcast || kind == OpKind::kReduce;
    case AlgorithmId::kPairwise:
      return kind == OpKind::kAllToAll || kind == OpKind::kAllToAllV;
    case AlgorithmId::kDissemination:
      return kind == OpKind::kBarrier;
    case AlgorithmId::kCmaDirect:
      return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter ||
             kind == OpKind::kAllGather || kind == OpKind::kBroadcast;
    case AlgorithmId::kHierarchical:
      return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter ||
             kind == OpKind::kAllGather || kind == OpKind::kBroadcast;
  }
  return false;
}

bool Usable(AlgorithmId id, const Peers& peers) {
  switch (id) {
    case AlgorithmId::kShmDirect:
      return peers.arena() != nullptr;
    case AlgorithmId::kCmaDirect:
      return peers.arena() != nullptr && peers.arena()->remote_read();
    default:
      return true;
  }
}

std::string Unusable(AlgorithmId id, const Peers& peers, absl::string_view transport) {
  // One rank's collective moves nothing between ranks: any algorithm's result is a local copy.
  if (Usable(id, peers) || peers.size() == 1) return "";
  if (peers.arena() == nullptr) {
    const int hosts = peers.nodes().num_nodes();
    if (hosts > 1) {
      return absl::StrCat("the ranks do not share memory (they span ", hosts, " hosts)");
    }
    return absl::StrCat("the ranks do not share memory (transport ", transport, ")");
  }
  return "cross-memory attach between the ranks is not permitted (process_vm_readv failed: "
         "ptrace is restricted, e.g. by kernel.yama.ptrace_scope or a seccomp profile)";
}

bool Posts(AlgorithmId id, const CollectiveArgs& args) {
  return id == AlgorithmId::kShmDirect && ShmDirect::FitsInLine(args);
}

Envelope MakeEnvelope(const CollectiveArgs& args, AlgorithmId algorithm, uint64_t seq) {
  Envelope e;
  e.seq = seq;
  // all_to_all_v's totals differ by rank: its messages' sizes are checked pair by pair instead.
  e.count = args.kind == OpKind::kAllToAllV ? 0 : args.count;
  e.kind = static_cast<uint16_t>(args.kind);
  e.dtype = static_cast<uint8_t>(args.dtype);
  e.op = static_cast<uint8_t>(args.op);
  e.root_or_tag = args.root;
  e.algorithm = static_cast<uint32_t>(algorithm);
  return e;
}

std::unique_ptr<Algorithm> MakeAlgorithm(AlgorithmId id, Peers& peers, const CollectiveArgs& args) {
  switch (id) {
    case AlgorithmId::kShmDirect:
      return std::make_unique<ShmDirect>(peers, args);
    case AlgorithmId::kRabenseifner:
      if (args.kind == OpKind::kAllReduce) {
        return std::make_unique<RabenseifnerAllReduce>(peers, args);
      }
      if (args.kind == OpKind::kReduceScatter) {
        return std::make_unique<RabenseifnerReduceScatter>(peers, args);
      }
      return std::make_unique<RabenseifnerAllGather>(peers, args);
    case AlgorithmId::kRecursiveDoubling:
      return std::make_unique<RecursiveDoublingAllReduce>(peers, args);
    case AlgorithmId::kPairwise:
      return std::make_unique<PairwiseAllToAll>(peers, args);
    case AlgorithmId::kDissemination:
      return std::make_unique<DisseminationBarrier>(peers);
    case AlgorithmId::kCmaDirect:
      return std::make_unique<CmaDirect>(peers, args);
    case AlgorithmId::kHierarchical:
      switch (args.kind) {
        case OpKind::kAllReduce:
          return std::make_unique<HierarchicalAllReduce>(peers, args);
        case OpKind::kReduceScatter:
          return std::make_unique<HierarchicalReduceScatter>(peers, args);
        case OpKind::kAllGather:
          return std::make_unique<HierarchicalAllGather>(peers, args);
        default:
          return std::make_unique<HierarchicalBroadcast>(peers, args);
      }
    case AlgorithmId::kTree:
      if (args.kind == OpKind::kBroadcast) return std::make_unique<TreeBroadcast>(peers, args);
      return std::make_unique<TreeReduce>(peers, args);
    case AlgorithmId::kRing:
      if (args.kind == OpKind::kAllReduce) return std::make_unique<RingAllReduce>(peers, args);
      if (args.kind == OpKind::kReduceScatter || args.kind == OpKind::kReduceScatterV) {
        return std::make_unique<RingReduceScatter>(peers, args);
      }
      return std::make_unique<RingAllGather>(peers, args);
  }
  return nullptr;
}

}  // namespace weft
