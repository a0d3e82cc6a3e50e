// Recursive-doubling all-reduce: in step k every rank exchanges its whole buffer with the rank
// whose number differs in bit k, and reduces what it receives into its own.
//
// log2(p) steps, half Rabenseifner's, for p times the bytes: the all-reduce of small messages
// (MPICH's choice below a few KiB), where each step costs its latency and the bytes next to
// nothing. Across nodes numbered node by node, the first steps stay inside a node and only the
// last log2(nodes) cross the network. Both partners compute (lower rank's value) op (upper
// rank's value), the operands in the same order, so every rank ends with the same bits, also for
// min and max of -0 and +0 or of NaNs, where the order decides (kernels' element.h). A rank
// count that is not a power of two folds its extra ranks first (power_of_two_fold.h).
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/power_of_two_fold.h"

namespace weft {

class RecursiveDoublingAllReduce final : public Algorithm {
 public:
  RecursiveDoublingAllReduce(Peers& peers, const CollectiveArgs& args);
  absl::Status Run() override;

 private:
  Peers& peers_;
  const CollectiveArgs args_;
  const PowerOfTwoFold fold_;
};

}  // namespace weft
