/* Just enough of the i8042 keyboard controller for a guest to reset itself:
 * Linux's reboot=k writes the "pulse reset line" command 0xfe to port 0x64
 * after reading the status port until the input buffer is empty.
 */
#ifndef TVM_I8042_H
#define TVM_I8042_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/core/err.h"

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT 0x64
#define I8042_CMD_RESET 0xfe

struct i8042; /* devices/legacy/i8042.c */

/* Build the controller; on_reset(ctx) is called (on a vCPU thread) when the
 * guest sends the CPU reset command. Returns 0 and *out (free with
 * i8042_close), or -ENOMEM with e set. */
int i8042_open(struct i8042 **out, void (*on_reset)(void *ctx), void *ctx, struct tvm_err *e);
/* Free k (NULL: nothing). No handler may run any more. */
void i8042_close(struct i8042 *k);

/* Bus handlers (vmm/kvm/bus.h bus_io_fn; opaque: the struct i8042) for the
 * one-byte ranges at I8042_DATA_PORT and I8042_CMD_PORT. Port 0x61 between
 * them belongs to the in-kernel PIT's speaker emulation. */
void i8042_data_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);
void i8042_cmd_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

#endif
