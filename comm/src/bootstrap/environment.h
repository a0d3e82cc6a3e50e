// Where a rank learns who it is and where the rendezvous is: the launcher's variables.
//
// Read in this order, the first that names a rank wins:
//   WEFT_RANK / WEFT_SIZE / WEFT_LOCAL_RANK / WEFT_LOCAL_SIZE   (weftrun)
//   RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE           (torchrun)
//   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE    (Open MPI's mpirun)
//   PMI_RANK / PMI_SIZE, with MPI_LOCALRANKID / MPI_LOCALNRANKS (Hydra) or
//     PMI_LOCAL_RANK / PMI_LOCAL_SIZE (Cray PALS)               (PMI: MPICH, Intel MPI, Cray)
//   SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, with the local size taken from
//     SLURM_TASKS_PER_NODE at SLURM_NODEID                      (srun)
// Numbers must be plain decimal digits; rank < size and local_rank < local_size. The size
// variable is required once the rank variable is present; the local pair is optional.
//
// The launcher's job id, used only for the defaults below, is the first present of the source's
// own (TORCHELASTIC_RUN_ID for torchrun, OMPI_MCA_ess_base_jobid for mpirun, PMI_JOBID /
// PMI_KVSNAME / PALS_APID for PMI, SLURM_JOB_ID[.SLURM_STEP_ID] for srun), then of all of those in
// the order SLURM, Open MPI, PMI, torchrun (a job launched inside another's allocation).
//
// The store address comes from WEFT_ADDR/WEFT_PORT, else MASTER_ADDR/MASTER_PORT. Without an
// address, a job known to fit one host (local_size == size) uses 127.0.0.1; otherwise store_host
// stays empty and the caller must report that WEFT_ADDR or MASTER_ADDR is needed. Without a port,
// one in [20000, 32767] is derived from the job id (hashed, so every rank derives the same one and
// concurrent jobs rarely collide; below the ephemeral range, so no connection holds it), or
// store_port stays 0 when there is no job id. The token comes from WEFT_TOKEN, else is derived
// from the job id (weaker: it is guessable by local users, which docs/ARCHITECTURE.md says), else
// stays empty.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weft {

struct LaunchEnvironment {
  int rank = 0;
  int size = 1;
  // -1 when the launcher does not say (PMI without Hydra's or PALS's variables, srun without
  // SLURM_TASKS_PER_NODE): the communicator then learns them from host identities.
  int local_rank = 0;
  int local_size = 1;
  std::string store_host;  // empty when the launcher named none
  int store_port = 0;      // 0 when neither named nor derivable
  std::string token;       // empty when neither named nor derivable
  std::string job_id;      // the launcher's job id, empty when there is none
  std::string source;      // "weftrun", "torchrun", "mpirun", "pmi", "slurm": for messages
};

// Fails (NotFound) with a message that lists the variables looked for when none names this rank,
// or (InvalidArgument) naming the variable and its value when they are inconsistent (rank >=
// size, non-numeric values, a port outside 1..65535, a variable set but empty).
absl::StatusOr<LaunchEnvironment> ReadLaunchEnvironment();

}  // namespace weft
