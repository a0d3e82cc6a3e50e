// weftrun's command line: how many ranks to start, where the job's rendezvous store lives, and
// the program every rank runs.
//
// Options end at "--" or at the first argument that is not an option (the program); everything
// after belongs to the program. torchrun's spellings (--nproc_per_node, --node_rank, ...) are
// accepted so that existing scripts work with the name changed.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weft::launcher {

struct LaunchOptions {
  int nproc_per_node = 0;  // ranks on this node
  // Ranks on each node, when -n listed them ("3,1": uneven nodes); empty when every node runs
  // nproc_per_node ranks.
  std::vector<int> node_sizes;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port, chosen when the store starts (single node only)
  absl::Duration timeout = absl::InfiniteDuration();
  bool prefix_output = true;
  bool help = false;                 // -h/--help: print kUsage, start nothing
  std::vector<std::string> command;  // the program, then its arguments

  int world_size() const;
  int first_rank() const;  // the global rank of this node's local rank 0
};

// What --help prints.
extern const char kUsage[];

// Parses the arguments after argv[0]. Fails with InvalidArgument naming the offending option
// when an option is unknown, lacks its value, is out of range, or when the combination cannot
// work (no -n, no program, a multi-node job without --master-port).
absl::StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args);

}  // namespace weft::launcher
