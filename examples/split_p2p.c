/* Splitting a communicator, and point-to-point transfers in groups.
 *
 *   weftrun -n 4 build/examples/example_split_p2p
 *
 * The even and the odd ranks each form a communicator and pass their world ranks around a ring
 * in it (sends and receives grouped, so the ring cannot deadlock). Then only world ranks 0 and 1
 * form a pair (the others pass WEFT_SPLIT_NOCOLOR) and exchange a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <weft/comm/weft.h>

#include "weft_check.h"

int main(void) {
  weftComm_t world, half, pair;
  int rank, nranks;
  WEFTCHECK(weftCommInitFromEnv(&world, NULL));
  WEFTCHECK(weftCommUserRank(world, &rank));
  WEFTCHECK(weftCommCount(world, &nranks));

  /* Collective over world: color = parity, ordered by world rank. */
  WEFTCHECK(weftCommSplit(world, rank % 2, rank, &half, NULL));
  int hrank, hsize;
  WEFTCHECK(weftCommUserRank(half, &hrank));
  WEFTCHECK(weftCommCount(half, &hsize));

  /* Ring: send my world rank right, receive my left neighbour's. */
  int mine = rank, from_left = -1;
  if (hsize > 1) {
    WEFTCHECK(weftGroupStart());
    WEFTCHECK(weftSend(&mine, 1, weftInt32, (hrank + 1) % hsize, half, NULL));
    WEFTCHECK(weftRecv(&from_left, 1, weftInt32, (hrank + hsize - 1) % hsize, half, NULL));
    WEFTCHECK(weftGroupEnd()); /* issues both, and waits: they were issued without requests */
  } else {
    from_left = rank;
  }
  /* In world ranks, my left neighbour in the half is two below me, wrapping within the half. */
  const int half_members = (nranks - rank % 2 + 1) / 2;
  const int expected = 2 * ((hrank + half_members - 1) % half_members) + rank % 2;
  printf("rank %d: %s half, rank %d of %d, got %d from the left: %s\n", rank,
         rank % 2 ? "odd" : "even", hrank, hsize, from_left,
         from_left == expected ? "ok" : "WRONG");

  /* Only world ranks 0 and 1 join; the others get no communicator (NULL). */
  WEFTCHECK(weftCommSplit(world, rank < 2 ? 0 : WEFT_SPLIT_NOCOLOR, rank, &pair, NULL));
  int pair_ok = 1;
  if (pair != NULL) {
    double message[3] = {1.5, 2.5, 3.5};
    if (rank == 0) {
      WEFTCHECK(weftSend(message, 3, weftDouble, 1, pair, NULL));
    } else {
      double got[3] = {0, 0, 0};
      WEFTCHECK(weftRecv(got, 3, weftDouble, 0, pair, NULL));
      pair_ok = got[0] == 1.5 && got[2] == 3.5;
      printf("rank %d: pair message %s\n", rank, pair_ok ? "ok" : "WRONG");
    }
    WEFTCHECK(weftCommDestroy(pair));
  } else {
    printf("rank %d: not in the pair\n", rank);
  }

  WEFTCHECK(weftCommDestroy(half));
  WEFTCHECK(weftCommDestroy(world));
  return from_left == expected && pair_ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
