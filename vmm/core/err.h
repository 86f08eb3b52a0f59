/* Error reporting shared by every layer of the library.
 *
 * Library code never exits on bad input: it fills a struct tvm_err with a
 * one-line message naming the thing and the reason, and returns -errno.
 */
#ifndef TVM_ERR_H
#define TVM_ERR_H

#include <stddef.h>

#include "vmm/core/tvm_types.h"

/* Record an error in e (may be NULL) and return -code, so callers can write
 * `return tvm_errf(e, EINVAL, "kernel %s: not an ELF file", path);`.
 * Formatting follows printf(3); the message is truncated to fit. */
int tvm_errf(struct tvm_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefix an already recorded message with "what: " (used when a lower layer
 * reported an error and the caller knows which file or device it was). */
void tvm_err_prefix(struct tvm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
