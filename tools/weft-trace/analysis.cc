#include "analysis.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rank_list.h"
#include "weft/comm/json.h"

namespace weft::trace {
namespace {

// What a rank called, as the ranks must agree on it: "all_reduce(count=4096, float32, sum)".
std::string Fingerprint(const OpRecord& op) {
  std::string text = absl::StrCat(op.op, "(count=", op.count);
  if (!op.dtype.empty()) absl::StrAppend(&text, ", ", op.dtype);
  if (!op.reduce_op.empty()) absl::StrAppend(&text, ", ", op.reduce_op);
  if (op.root >= 0) absl::StrAppend(&text, ", root=", op.root);
  return text + ")";
}

// a - b in floating point: recorded times come from files and may be anything, and int64
// subtraction could overflow.
double Minus(int64_t a, int64_t b) { return static_cast<double>(a) - static_cast<double>(b); }

std::string Ms(double ns) { return absl::StrFormat("%.1f ms", ns / 1e6); }

// One communicator's dumps, indexed for the questions Diagnose asks.
struct Comm {
  std::string name;
  int64_t size = 0;
  std::map<int64_t, const RankDump*> by_rank;
  // Per rank: its collectives by sequence number (the newest record wins).
  std::map<int64_t, std::map<uint64_t, const OpRecord*>> collectives;
};

std::map<std::string, Comm> Group(const std::vector<RankDump>& dumps) {
  std::map<std::string, Comm> comms;
  for (const RankDump& dump : dumps) {
    Comm& comm = comms[dump.comm];
    comm.name = dump.comm;
    comm.size = std::max(comm.size, dump.size);
    // Two dumps of one rank (a re-run into the same directory): keep the newer.
    auto [it, fresh] = comm.by_rank.emplace(dump.rank, &dump);
    if (!fresh && it->second->dumped_ns < dump.dumped_ns) it->second = &dump;
  }
  for (auto& [name, comm] : comms) {
    for (const auto& [rank, dump] : comm.by_rank) {
      auto& ops = comm.collectives[rank];
      for (const OpRecord& op : dump->ops) {
        if (op.collective) ops[op.seq] = &op;
      }
    }
  }
  return comms;
}

// How one rank stands with operation `seq`; a failure's message goes to `error`, so ranks that
// failed alike group together.
std::string RankStanding(const Comm& comm, int64_t rank, uint64_t seq, bool* never_reached,
                         std::string* error = nullptr) {
  *never_reached = false;
  const RankDump& dump = *comm.by_rank.at(rank);
  const auto& ops = comm.collectives.at(rank);
  if (auto it = ops.find(seq); it != ops.end()) {
    const OpRecord& op = *it->second;
    if (op.state == "done") return "completed it";
    if (op.state == "failed") {
      if (error != nullptr) *error = op.error;
      return "failed in it";
    }
    if (op.state == "running") {
      return absl::StrCat("was inside it (running for ", Ms(Minus(dump.dumped_ns, op.start_ns)),
                          " when dumped)");
    }
    return absl::StrCat("had queued it but not started it (", op.state, ")");
  }
  if (!ops.empty() && ops.begin()->first > seq) return "completed it (its record was overwritten)";
  *never_reached = true;
  if (ops.empty()) return "never reached it (no collective recorded)";
  const OpRecord& last = *ops.rbegin()->second;
  return absl::StrCat("never reached it; its last collective was ", last.op, " #", last.seq, " (",
                      last.state, ")");
}

void DiagnoseComm(const Comm& comm, std::string* out) {
  std::vector<int64_t> present, missing;
  for (int64_t r = 0; r < comm.size; ++r) {
    (comm.by_rank.count(r) != 0 ? present : missing).push_back(r);
  }
  absl::StrAppend(out, "communicator ", comm.name, ": ", comm.size, " ranks, dumps from ",
                  RankList(present), "\n");
  for (int64_t r : present) {
    const RankDump& d = *comm.by_rank.at(r);
    absl::StrAppend(out, "  rank ", r, ": pid ", d.pid, " on host ", d.host,
                    ", dumped because: ", d.reason, "\n");
  }
  if (!missing.empty()) {
    absl::StrAppend(out, "  no dump from ", RankList(missing),
                    " (the process died before it could write one, or wrote it elsewhere)\n");
  }

  // The first sequence number not completed by every rank that has a dump.
  std::set<uint64_t> seqs;
  for (const auto& [rank, ops] : comm.collectives) {
    for (const auto& [seq, op] : ops) seqs.insert(seq);
  }
  std::optional<uint64_t> first;
  for (uint64_t seq : seqs) {
    for (int64_t r : present) {
      bool never = false;
      if (RankStanding(comm, r, seq, &never).rfind("completed it", 0) != 0) {
        first = seq;
        break;
      }
    }
    if (first) break;
  }
  if (!first) {
    absl::StrAppend(out, "  every recorded collective completed on every rank with a dump\n");
    if (!missing.empty()) absl::StrAppend(out, "  culprit: look at ", RankList(missing), "\n");
    return;
  }
  const uint64_t seq = *first;

  // What each rank called as #seq.
  std::map<std::string, std::vector<int64_t>> calls;
  for (int64_t r : present) {
    const auto& ops = comm.collectives.at(r);
    if (auto it = ops.find(seq); it != ops.end()) calls[Fingerprint(*it->second)].push_back(r);
  }
  std::string what = calls.empty() ? absl::StrCat("collective #", seq)
                                   : absl::StrCat(calls.begin()->first, " #", seq);
  if (calls.size() == 1) {
    const std::string& print = calls.begin()->first;
    what = absl::StrCat(print.substr(0, print.find('(')), " #", seq, " ",
                        print.substr(print.find('(')));
  }
  absl::StrAppend(out, "  first operation not completed everywhere: ", what, "\n");

  std::map<std::string, std::vector<int64_t>> standings;
  std::map<int64_t, std::string> errors;
  std::vector<int64_t> never_reached;
  for (int64_t r : present) {
    bool never = false;
    std::string error;
    standings[RankStanding(comm, r, seq, &never, &error)].push_back(r);
    if (never) never_reached.push_back(r);
    if (!error.empty()) errors[r] = error;
  }
  for (const auto& [standing, ranks] : standings) {
    absl::StrAppend(out, "    ", RankList(ranks), ": ", standing, "\n");
    for (int64_t r : ranks) {
      if (auto it = errors.find(r); it != errors.end()) {
        absl::StrAppend(out, "      rank ", r, ": ", it->second, "\n");
      }
    }
  }
  for (int64_t r : missing) never_reached.push_back(r);
  std::sort(never_reached.begin(), never_reached.end());

  if (calls.size() > 1) {
    // Largest group last: "rank 3 called X as op #57, ranks 0-2 called Y".
    std::vector<std::pair<std::string, std::vector<int64_t>>> groups(calls.begin(), calls.end());
    std::sort(groups.begin(), groups.end(),
              [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    std::vector<std::string> parts;
    for (size_t i = 0; i < groups.size(); ++i) {
      parts.push_back(absl::StrCat(RankList(groups[i].second), " called ", groups[i].first,
                                   i == 0 ? absl::StrCat(" as op #", seq) : ""));
    }
    absl::StrAppend(out, "  culprit: mismatched collective: ", absl::StrJoin(parts, ", "), "\n");
  } else if (!never_reached.empty()) {
    absl::StrAppend(out, "  culprit: ", RankList(never_reached), " never reached ", what,
                    never_reached.size() == 1 ? "; the other ranks waited for it\n"
                                              : "; the other ranks waited for them\n");
  } else {
    std::vector<int64_t> failed;
    for (const auto& [standing, ranks] : standings) {
      if (standing.rfind("failed", 0) == 0) failed.insert(failed.end(), ranks.begin(), ranks.end());
    }
    if (!failed.empty()) {
      std::sort(failed.begin(), failed.end());
      absl::StrAppend(out, "  culprit: every rank reached it; it failed on ", RankList(failed),
                      " (read their errors above: the first names the peer or the cause)\n");
    } else {
      absl::StrAppend(out,
                      "  culprit: every rank is inside it and none failed: a slow or stuck peer "
                      "link, or the dumps were taken while it ran\n");
    }
  }
}

}  // namespace

std::string Diagnose(const std::vector<RankDump>& dumps) {
  std::string out;
  for (const auto& [name, comm] : Group(dumps)) DiagnoseComm(comm, &out);
  return out;
}

std::string ChromeTrace(const std::vector<RankDump>& dumps) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const RankDump& d : dumps) {
    for (const OpRecord& op : d.ops) {
      if (op.enqueue_ns > 0) origin = std::min(origin, op.enqueue_ns);
    }
  }
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;
  auto us = [origin](int64_t ns) { return absl::StrFormat("%.3f", Minus(ns, origin) / 1000.0); };
  std::map<std::string, int> comm_track;
  for (const RankDump& d : dumps) comm_track.emplace(d.comm, 0);
  int next_track = 0;
  for (auto& [name, track] : comm_track) track = next_track++;

  std::vector<std::string> events;
  std::set<std::pair<int64_t, int>> named;
  for (const RankDump& d : dumps) {
    const int tid = comm_track[d.comm];
    if (named.emplace(d.rank, -1).second) {
      events.push_back(absl::StrCat(
          R"({"ph": "M", "name": "process_name", "pid": )", d.rank, R"(, "args": {"name": )",
          JsonQuote(absl::StrCat("rank ", d.rank, " (pid ", d.pid, " on ", d.host, ")")), "}}"));
    }
    if (named.emplace(d.rank, tid).second) {
      events.push_back(absl::StrCat(R"({"ph": "M", "name": "thread_name", "pid": )", d.rank,
                                    R"(, "tid": )", tid, R"(, "args": {"name": )",
                                    JsonQuote(absl::StrCat("communicator ", d.comm)), "}}"));
    }
    for (const OpRecord& op : d.ops) {
      if (op.start_ns <= 0) continue;  // queued only: nothing ran
      const int64_t end = op.end_ns > 0 ? op.end_ns : d.dumped_ns;
      std::string args =
          absl::StrCat(R"({"seq": )", op.seq, R"(, "count": )", op.count, R"(, "bytes": )",
                       op.bytes, R"(, "algorithm": )", JsonQuote(op.algorithm), R"(, "state": )",
                       JsonQuote(op.state), R"(, "queued_us": )",
                       absl::StrFormat("%.3f", Minus(op.start_ns, op.enqueue_ns) / 1000.0));
      if (!op.error.empty()) absl::StrAppend(&args, R"(, "error": )", JsonQuote(op.error));
      args += "}";
      events.push_back(absl::StrCat(
          R"({"ph": "X", "name": )",
          JsonQuote(op.collective ? absl::StrCat(op.op, " #", op.seq) : op.op), R"(, "cat": )",
          JsonQuote(op.collective ? "collective" : "p2p"), R"(, "pid": )", d.rank, R"(, "tid": )",
          tid, R"(, "ts": )", us(op.start_ns), R"(, "dur": )",
          absl::StrFormat("%.3f", std::max(Minus(end, op.start_ns), 0.0) / 1000.0), R"(, "args": )",
          args, "}"));
    }
  }
  return absl::StrCat("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n  ",
                      absl::StrJoin(events, ",\n  "), "\n]}\n");
}

}  // namespace weft::trace
