/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78, RFC 3720 appendix
 * B.4), used to detect damaged snapshot state files. Not a MAC: it catches
 * truncation and bit flips, not a deliberate forgery. */
#ifndef TVM_CRC32C_H
#define TVM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC of len bytes at p continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *p, size_t len);

#endif
