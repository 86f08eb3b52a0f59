#include "vmm/core/crc32c.h"

#include <pthread.h>

static uint32_t table[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[i] = c;
	}
}

uint32_t crc32c(uint32_t crc, const void *p, size_t len)
{
	const uint8_t *b = p;

	pthread_once(&once, make_table);
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
