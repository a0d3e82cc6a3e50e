// Where a rank learns who it is and where the rendezvous is: the launcher's variables.
//
// Read in this order, the first that names a rank wins:
//   WEFT_RANK / WEFT_SIZE / WEFT_LOCAL_RANK / WEFT_LOCAL_SIZE   (weftrun)
//   RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE           (torchrun)
//   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE    (Open MPI's mpirun)
//   PMI_RANK / PMI_SIZE                                         (PMI: MPICH, Intel MPI)
//   SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID                 (srun)
// The store address comes from WEFT_ADDR/WEFT_PORT, else MASTER_ADDR/MASTER_PORT, else (for a
// single-host job started without either) 127.0.0.1 and a port derived from the launcher's job
// id. The token comes from WEFT_TOKEN, else is derived from the launcher's job id (weaker: it is
// guessable by local users, which docs/ARCHITECTURE.md says).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weft {

struct LaunchEnvironment {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string store_host;  // empty when the launcher named none
  int store_port = 0;
  std::string token;
  std::string source;  // "weftrun", "torchrun", "mpirun", "pmi", "slurm": for messages
};

// Fails with a message that lists the variables looked for when none names this rank, or when
// they are inconsistent (rank >= size, non-numeric values).
absl::StatusOr<LaunchEnvironment> ReadLaunchEnvironment();

}  // namespace weft
