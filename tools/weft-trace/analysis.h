// What weft-trace concludes from the flight-recorder dumps of a job's ranks.
//
// Collectives carry a sequence number that every rank of a communicator shares, so the dumps
// line up by (communicator, seq). The interesting operation is the first one that did not
// complete on every rank: the report says, for each rank, whether it completed it, failed in it
// (and why), is still inside it, or never reached it (and what it did last), and whether the
// ranks even agreed on what that operation was.
#pragma once

#include <string>
#include <vector>

#include "dump.h"

namespace weft::trace {

// The human-readable diagnosis, one section per communicator.
std::string Diagnose(const std::vector<RankDump>& dumps);

// Every recorded operation as a Chrome trace (chrome://tracing, ui.perfetto.dev): one process per
// rank, one track per communicator, times relative to the earliest operation.
std::string ChromeTrace(const std::vector<RankDump>& dumps);

}  // namespace weft::trace
