#include "bootstrap/environment.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "weft/kernels/hash.h"

namespace weft {
namespace {

struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  // (local rank, local size) pairs; the first of which either variable is set wins.
  std::vector<std::pair<const char*, const char*>> local;
};

const std::vector<Launcher>& Launchers() {
  // clang-format off
  static const auto* launchers = new std::vector<Launcher>{
      {"weftrun", "WEFT_RANK", "WEFT_SIZE", {{"WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE"}}},
      {"torchrun", "RANK", "WORLD_SIZE", {{"LOCAL_RANK", "LOCAL_WORLD_SIZE"}}},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}}},
      {"pmi", "PMI_RANK", "PMI_SIZE",
       {{"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}, {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"}}},
      // srun's local size is not a variable of its own: see SlurmLocalSize.
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", {{"SLURM_LOCALID", nullptr}}},
  };
  // clang-format on
  return *launchers;
}

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Values are echoed in errors; a runaway one is cut so the message stays readable.
std::string Shown(absl::string_view value) {
  constexpr size_t kMaxShown = 64;
  if (value.size() <= kMaxShown) return std::string(value);
  return absl::StrCat(value.substr(0, kMaxShown), "...");
}

// Plain decimal digits only: SimpleAtoi alone would also take "+3", " 3" and "-0".
absl::StatusOr<int> ParseCount(const char* name, absl::string_view text) {
  int value = 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", Shown(text), "' is not a non-negative decimal integer"));
  }
  return value;
}

// SLURM_TASKS_PER_NODE lists tasks per node as "count[(xrepeat)]" items, e.g. "2(x3),1"; this
// node's entry is at SLURM_NODEID. -1 when either variable is absent.
absl::StatusOr<int> SlurmLocalSize() {
  const std::optional<std::string> tasks = Env("SLURM_TASKS_PER_NODE");
  const std::optional<std::string> node_text = Env("SLURM_NODEID");
  if (!tasks || !node_text) return -1;
  absl::StatusOr<int> node = ParseCount("SLURM_NODEID", *node_text);
  if (!node.ok()) return node.status();
  const auto malformed = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_TASKS_PER_NODE='", Shown(*tasks),
                     "' is not in Slurm's 'count[(xrepeat)],...' form"));
  };
  int remaining = *node;
  for (absl::string_view item : absl::StrSplit(*tasks, ',')) {
    absl::string_view count_text = item;
    int repeat = 1;
    if (const size_t open = item.find('('); open != absl::string_view::npos) {
      count_text = item.substr(0, open);
      absl::string_view suffix = item.substr(open);
      if (suffix.size() < 4 || suffix.substr(0, 2) != "(x" || suffix.back() != ')') {
        return malformed();
      }
      absl::StatusOr<int> r =
          ParseCount("SLURM_TASKS_PER_NODE", suffix.substr(2, suffix.size() - 3));
      if (!r.ok() || *r == 0) return malformed();
      repeat = *r;
    }
    absl::StatusOr<int> count = ParseCount("SLURM_TASKS_PER_NODE", count_text);
    if (!count.ok()) return malformed();
    if (remaining < repeat) return *count;
    remaining -= repeat;
  }
  return absl::InvalidArgumentError(absl::StrCat("SLURM_NODEID=", *node,
                                                 " is beyond the nodes listed in "
                                                 "SLURM_TASKS_PER_NODE='",
                                                 Shown(*tasks), "'"));
}

// The job id as one launcher family exports it, prefixed with the family; "" when absent.
std::string JobIdOf(absl::string_view family) {
  const auto first = [](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names) {
      if (std::optional<std::string> v = Env(name); v && !v->empty()) return *v;
    }
    return "";
  };
  std::string id;
  if (family == "slurm") {
    id = first({"SLURM_JOB_ID", "SLURM_JOBID"});
    const std::string step = first({"SLURM_STEP_ID", "SLURM_STEPID"});
    if (!id.empty() && !step.empty()) absl::StrAppend(&id, ".", step);
  } else if (family == "mpirun") {
    id = first({"OMPI_MCA_ess_base_jobid"});
  } else if (family == "pmi") {
    id = first({"PMI_JOBID", "PMI_KVSNAME", "PALS_APID"});
  } else if (family == "torchrun") {
    id = first({"TORCHELASTIC_RUN_ID"});
  }
  return id.empty() ? "" : absl::StrCat(family, ":", id);
}

std::string JobId(absl::string_view source) {
  if (std::string own = JobIdOf(source); !own.empty()) return own;
  for (absl::string_view family : {"slurm", "mpirun", "pmi", "torchrun"}) {
    if (std::string id = JobIdOf(family); !id.empty()) return id;
  }
  return "";
}

// Mixed after FNV-1a so that job ids differing in one character give unrelated ports.
uint64_t StableHash(absl::string_view text) { return Mix64(Fnv1a(text)); }

// Below Linux's default ephemeral range (32768-60999), so that no process's outgoing connection,
// nor a listener on port 0, can already hold the port a job derives. Every rank must derive the
// same port, so the range is fixed rather than read from this host's ip_local_port_range.
constexpr int kDerivedPortBase = 20000;
constexpr int kDerivedPortSpan = 12768;  // ports 20000..32767

int DerivedPort(absl::string_view job_id) {
  return kDerivedPortBase +
         static_cast<int>(StableHash(absl::StrCat("weft-port/", job_id)) % kDerivedPortSpan);
}

std::string DerivedToken(absl::string_view job_id) {
  return absl::StrFormat("%016x%016x", StableHash(absl::StrCat("weft-token/0/", job_id)),
                         StableHash(absl::StrCat("weft-token/1/", job_id)));
}

// The first of `names` that is set; a variable that is set but empty is an error.
absl::StatusOr<std::optional<std::pair<const char*, std::string>>> FirstSet(
    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::optional<std::string> value = Env(name);
    if (!value) continue;
    if (value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is set but empty"));
    }
    return std::make_optional(std::make_pair(name, *std::move(value)));
  }
  return std::nullopt;
}

absl::Status ReadRendezvous(LaunchEnvironment& env) {
  absl::StatusOr<std::optional<std::pair<const char*, std::string>>> host =
      FirstSet({"WEFT_ADDR", "MASTER_ADDR"});
  if (!host.ok()) return host.status();
  absl::StatusOr<std::optional<std::pair<const char*, std::string>>> port =
      FirstSet({"WEFT_PORT", "MASTER_PORT"});
  if (!port.ok()) return port.status();
  absl::StatusOr<std::optional<std::pair<const char*, std::string>>> token =
      FirstSet({"WEFT_TOKEN"});
  if (!token.ok()) return token.status();

  env.job_id = JobId(env.source);
  if (*host) {
    env.store_host = (*host)->second;
  } else if (env.size == 1 || env.local_size == env.size) {
    env.store_host = "127.0.0.1";
  }
  if (*port) {
    absl::StatusOr<int> number = ParseCount((*port)->first, (*port)->second);
    if (!number.ok()) return number.status();
    if (*number < 1 || *number > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat((*port)->first, "=", *number, " is not a TCP port (1..65535)"));
    }
    env.store_port = *number;
  } else if (!env.job_id.empty()) {
    env.store_port = DerivedPort(env.job_id);
  }
  if (*token) {
    env.token = (*token)->second;
  } else if (!env.job_id.empty()) {
    env.token = DerivedToken(env.job_id);
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchEnvironment> Read(const Launcher& launcher, const std::string& rank_text) {
  LaunchEnvironment env;
  env.source = launcher.source;
  const auto annotate = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat("launcher variables (", launcher.source, "): ", s.message()));
  };
  absl::StatusOr<int> rank = ParseCount(launcher.rank, rank_text);
  if (!rank.ok()) return annotate(rank.status());
  const std::optional<std::string> size_text = Env(launcher.size);
  if (!size_text) {
    return annotate(absl::InvalidArgumentError(
        absl::StrCat(launcher.rank, " is set but ", launcher.size, " is not")));
  }
  absl::StatusOr<int> size = ParseCount(launcher.size, *size_text);
  if (!size.ok()) return annotate(size.status());
  if (*size < 1 || *rank >= *size) {
    return annotate(absl::InvalidArgumentError(
        absl::StrCat(launcher.rank, "=", *rank, " is not below ", launcher.size, "=", *size)));
  }
  env.rank = *rank;
  env.size = *size;

  env.local_rank = -1;
  env.local_size = -1;
  for (const auto& [rank_name, size_name] : launcher.local) {
    const std::optional<std::string> lr = Env(rank_name);
    const std::optional<std::string> ls =
        size_name != nullptr ? Env(size_name) : std::optional<std::string>();
    if (!lr && !ls) continue;
    if (lr) {
      absl::StatusOr<int> v = ParseCount(rank_name, *lr);
      if (!v.ok()) return annotate(v.status());
      env.local_rank = *v;
    }
    if (ls) {
      absl::StatusOr<int> v = ParseCount(size_name, *ls);
      if (!v.ok()) return annotate(v.status());
      env.local_size = *v;
    }
    break;
  }
  if (env.source == "slurm") {
    absl::StatusOr<int> local_size = SlurmLocalSize();
    if (!local_size.ok()) return annotate(local_size.status());
    env.local_size = *local_size;
  }
  if (env.local_size == 0 || env.local_size > env.size) {
    return annotate(absl::InvalidArgumentError(absl::StrCat(
        "the local size ", env.local_size, " is not within 1..", launcher.size, "=", env.size)));
  }
  if (env.local_rank >= 0 && env.local_size > 0 && env.local_rank >= env.local_size) {
    return annotate(absl::InvalidArgumentError(absl::StrCat(
        "the local rank ", env.local_rank, " is not below the local size ", env.local_size)));
  }
  if (absl::Status s = ReadRendezvous(env); !s.ok()) return annotate(s);
  return env;
}

}  // namespace

absl::StatusOr<LaunchEnvironment> ReadLaunchEnvironment() {
  std::string looked_for;
  for (const Launcher& launcher : Launchers()) {
    if (std::optional<std::string> rank = Env(launcher.rank)) return Read(launcher, *rank);
    absl::StrAppend(&looked_for, looked_for.empty() ? "" : ", ", launcher.rank, "/", launcher.size,
                    " (", launcher.source, ")");
  }
  return absl::NotFoundError(absl::StrCat(
      "no launcher variable names this process's rank; looked for ", looked_for,
      ". Start the job with weftrun, torchrun, mpirun or srun, or set WEFT_RANK and WEFT_SIZE "
      "(and WEFT_ADDR, WEFT_PORT, WEFT_TOKEN) yourself"));
}

}  // namespace weft
