// Calibration: how a communicator gets the CostModels its tuners price algorithms with, one per
// lasting state of the host, the state it starts in first (where their tuners disagree, the job's
// trials decide: algorithm_trials.h).
//
// Collective over the communicator, at creation, before the engine starts. Rank 0 decides:
//   - WEFT_TUNING_FILE set: that file is the model (missing entries keep their defaults; a copy
//     of a cache serves if measured with this revision of the algorithms), and nothing is
//     measured or cached; a list of files (a:b:c) names the host's states, the first the one a
//     job starts in;
//   - otherwise the per-host cache, tuning-<host>.txt in WEFT_CACHE_DIR (default
//     $XDG_CACHE_HOME/weft, else ~/.cache/weft); what this communicator uses and the cache lacks
//     is measured, and rank 0 rewrites the cache (atomically). A cache measured by another
//     revision of the algorithms (its first line) is measured again. A cache that holds
//     shm_direct's curves is checked first, once a process (5-20 ms on 2 ranks), against the host
//     as it runs now: shm_direct's 1 MiB all-reduce is timed. When the cache prices it over 1.5x
//     off either way, the nearest of its alternates (AlternateCachePath: other lasting states of
//     the host, as measured in them) stands in; when none is within 1.5x, the direct curves are
//     measured in the state the host is in now and kept as a state of their own. A host found
//     faster than that is measured at once (the cache was measured while the host was
//     disturbed); one found slower only when it runs so steadily, with its cores to itself
//     (JudgeRecheck; tuner_calibration.cc, kRecheckBytes). A cache that holds the net class for
//     the communicator's node count is checked too, once a process: every lane's ring across
//     nodes at 2 MiB, all at once; priced over 1.5x off either way (another network, transport or
//     link rate than the cache was measured over), the network classes and the anchors are
//     measured again. The shm class: a ring
//     all-reduce inside every node at once; the net class: a ring all-reduce across nodes in every
//     lane at once; shm_direct and cma_direct (one host): each of their all-reduce, reduce-scatter,
//     all-gather and broadcast, out of place; over several nodes (up to 32 ranks), the anchors:
//     each collective of the algorithms over links, whole. The rings are timed at 256 B and 2 MiB,
//     the direct collectives at 256 B, 32, 128 and 512 KiB, 1, 2, 8 and 32 MiB (from 512 KiB
//     warmed once, then timed over runs in a row), the anchors at 256 B and 8 KiB (broadcasts
//     also at 2 MiB), the probes taking turns for six rounds, and fitted from the median samples.
//     This takes about 1.6 s on 2 ranks of one host (with shared_buffers, cma_direct is measured
//     over AllocShared buffers instead) and about 1 s on the rig's 2 nodes x 2 ranks, and only the
//     first communicator of a size on a host pays. With less than 20 s left of the creation
//     deadline (a low WEFT_TIMEOUT) nothing is measured: the cache or the built-in defaults stand.
// Where every rank shares the host and its cache has alternates, those are the other states.
// Rank 0 then publishes the models through the store and every rank, rank 0 too, adopts them, so
// all ranks price with the same numbers and choose the same algorithms.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/tuner_model.h"
#include "bootstrap/store.h"
#include "deadline.h"
#include "peers.h"

namespace weft {

absl::StatusOr<std::vector<CostModel>> LoadOrCalibrate(Peers& peers, Store& store,
                                                       const Deadline& deadline);

// The cache file rank 0 of a communicator on this host reads and writes ("" when neither
// WEFT_CACHE_DIR, XDG_CACHE_HOME nor HOME is set).
std::string TuningCachePath();
// A host's cache keeps up to kMaxHostStates lasting states of the host, each as measured in it:
// the cache itself, last used, and alternates, in the order they were last used.
inline constexpr int kMaxHostStates = 3;
// Where the `i`th alternate of `cache` (a TuningCachePath()) is kept, 1 <= i < kMaxHostStates.
std::string AlternateCachePath(const std::string& cache, int i);
// What a job's check of the tuning cache against the host as it runs now decides.
struct RecheckVerdict {
  int stand_in = 0;            // the state that stands in: an index into the prices judged
  bool measure_again = false;  // the direct curves are measured again, as a state of their own
  bool new_state = false;      // ... because the host runs steadily slower than the states on file
  double now = 0;              // the samples' median
  std::string explanation;     // for WEFT_DEBUG=INFO
};
// `prices`: each state's price of shm_direct's 1 MiB all-reduce, the cache's first, then its
// alternates'; `samples`: what it takes now, in seconds; `cpu_share`: the part of the samples'
// time rank 0 ran on a core (see LoadOrCalibrate).
RecheckVerdict JudgeRecheck(const std::vector<double>& prices, const std::vector<double>& samples,
                            double cpu_share);
// The cache's first line: the revision of the algorithms it was measured with.
std::string TuningCacheRevisionLine();

}  // namespace weft
