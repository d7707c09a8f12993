/* libFuzzer target: any byte string through the frame parser and the
 * payload readers must neither crash nor read out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		struct gr_frame f;
		size_t used;
		int rc = proto_parse(data + off, size - off, &f, &used, NULL);
		if (rc <= 0)
			break;
		struct gr_rd rd;
		rd_init(&rd, f.payload, f.len);
		while (!rd.bad && rd.n) {
			switch (get_u8(&rd) % 5) {
			case 0: (void)get_u32(&rd); break;
			case 1: (void)get_u64(&rd); break;
			case 2: { size_t n; (void)get_bytes(&rd, &n); break; }
			case 3: free(get_str(&rd)); break;
			default: (void)get_u16(&rd); break;
			}
		}
		off += used;
	}
	return 0;
}
