// Runs the ranks of one fault-test job as real processes and records how and when each ended.
//
// The test process hosts the job's rendezvous store (Communicator::CreateUniqueId), so a rank
// can die without taking the store with it, and no launcher stops the survivors: the test sees
// exactly what each surviving rank reports, and when.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace weft::testing {

struct RankOutcome {
  pid_t pid = 0;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  absl::Time ended;    // when the test reaped it
  std::string output;  // stdout and stderr
};

struct JobOutcome {
  std::vector<RankOutcome> ranks;
  bool timed_out = false;  // the limit passed; the remaining ranks were killed
};

// Starts `program SCENARIO RANK SIZE ARGS...` for every rank with the current environment plus
// `env`, and waits until all have ended or `limit` has passed.
JobOutcome RunRanks(const std::string& program, const std::string& scenario, int size,
                    const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& env,
                    absl::Duration limit);

}  // namespace weft::testing
