/* weft.h on its own, as strict C99 with every warning an error (built, never run). */
#include <weft/comm/weft.h>

weftConfig_t weft_h_c99_config = WEFT_CONFIG_INITIALIZER;
